// What a session measures while it runs: time per part of the forward pass, per-layer FFN
// counts, and the hook through which the offline tools see the dense FFN.
#pragma once

#include <cstdint>
#include <functional>

namespace strata {

// Seconds per part of the forward pass, accumulated over calls. Measured between events on the
// backend's timeline (backends/backend.h), so they stay meaningful when ops run asynchronously.
struct ForwardTimes {
  double attention = 0;  // norms, q/k/v/o products, rotary, attention itself
  double predictor = 0;  // activation predictors (predict mode)
  double ffn = 0;        // the FFN proper, including neuron selection
  double output = 0;     // final norm and the vocabulary projection
  // A split FFN: its device part (on the device's timeline) and its RAM part (the CPU's wall
  // time), which run at the same time; both are inside `ffn`.
  double ffn_device_part = 0, ffn_ram_part = 0;
  // A split FFN's waits: the CPU for the device (its attention, predictor and selection, before
  // the selection comes to the host), and the device for the CPU (from the end of its own part
  // to the arrival of the CPU's sum, on the device's timeline).
  double ffn_host_waits = 0, ffn_device_waits = 0;
};

// Per layer, counted over (token, neuron) pairs since the session began.
struct FfnLayerStats {
  uint64_t computed = 0;  // neurons whose up/down rows were computed (all in dense mode)
  uint64_t nonzero = 0;   // activations that came out non-zero
  // Sparse modes: neurons whose rows were read (each batch's union), summed over batches.
  uint64_t rows_read = 0;
  // check_predictor only: truly active neurons, predicted ones, and predicted among the active.
  uint64_t truly_active = 0, predicted = 0, predicted_and_active = 0;
};

// Called in dense mode after each layer's FFN activation for a batch of n tokens, with the
// residual stream entering the FFN (before ffn_norm; n rows of n_embd) and the activations h
// (n rows of n_ff): what the profiler counts and predictors are trained on.
using FfnObserver =
    std::function<void(int64_t layer, int64_t n, const float* residual, const float* h)>;

// Called in a sparse mode after each layer's selection for a batch of n tokens, with
// selected[b * neurons + i] != 0 where token b's FFN reads neuron i (the predictor's choice in
// predict mode, the firing neurons in gate-first; a mixture's neurons are every expert's, the
// unchosen experts' unselected): what a profile of the mode a run will use counts.
using SelectionObserver =
    std::function<void(int64_t layer, int64_t n, int64_t neurons, const uint8_t* selected)>;

}  // namespace strata
