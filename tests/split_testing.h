// Shared by the split FFN tests (test_split_ffn.cpp: a device's hot neurons beside RAM;
// test_three_tiers.cpp: beside a bundled model's RAM caches and flash): the prompt, the splits,
// planned runs on the reference device, and the CPU backend that computes the part below.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/refdev/reference_device.h"
#include "planning/planned_session.h"
#include "runtime/session.h"
#include "test_helpers.h"

namespace strata::split_testing {

inline const std::vector<int32_t> kPrompt = {1, 5, 200, 17, 3, 99, 42, 7};

// Every weight type strata computes.
inline constexpr DType kEveryType[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                       DType::Q4_0, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                                       DType::Q5_K, DType::Q6_K};

// Every `step`-th neuron of each layer (from `first`): a split that cuts every bucket (of a
// mixture, every expert's neurons: the sparse modes' numbering).
inline std::vector<std::vector<int32_t>> every(const Model& m, int step, int first = 0) {
  std::vector<std::vector<int32_t>> v(static_cast<size_t>(m.config.n_layer));
  for (auto& l : v)
    for (int32_t i = first; i < m.config.ffn_neurons(); i += step) l.push_back(i);
  return v;
}

inline std::vector<std::vector<float>> run(const Model& m, Backend& be, SessionOptions o) {
  return strata::testing::prompt_and_decode_logits(m, be, o, kPrompt, {150, 8, 64, 33});
}

inline double max_relative(const std::vector<std::vector<float>>& a,
                           const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t p = 0; p < a.size(); ++p) {
    double scale = 0, diff = 0;
    for (size_t i = 0; i < a[p].size(); ++i) {
      scale = std::max(scale, std::abs(double{b[p][i]}));
      diff = std::max(diff, std::abs(double{a[p][i]} - b[p][i]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// A planned predict-mode run of 64 positions on the reference device.
inline RunRequest on_reference() {
  RunRequest r;
  r.mode = FfnMode::Predict;
  r.n_ctx = 64;
  r.device.device = "reference";
  return r;
}

// Bytes a session of 64 positions holds on the reference device: the whole model, and its
// dense blocks with the buffers (before any neuron).
struct DeviceSizes {
  uint64_t whole, dense;
};
inline DeviceSizes device_sizes(const Model& m, DType kv = DType::F32) {
  const Inventory inv = take_inventory(m, {64, FfnMode::Predict, {kv, kv}});
  return {device_session_bytes(m, inv, DeviceKind::Reference),
          device_session_bytes(m, inv, DeviceKind::Reference, false)};
}

inline size_t neurons_on_device(const SessionOptions& o) {
  size_t n = 0;
  for (const auto& l : o.vram_neurons) n += l.size();
  return n;
}

// A planned session's options for the same placement computed on the CPU alone.
inline SessionOptions cpu_alone(SessionOptions o) {
  o.host_backend = nullptr;
  o.host_layers.clear();
  o.output_on_host = false;
  return o;
}

// The most a reference device held at once.
inline uint64_t peak(const Backend& device) {
  return dynamic_cast<const ReferenceDevice&>(device).peak_allocated();
}

// The CPU backend beside the device (the split's part below) and its pool.
class CpuBesideDevice : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  CpuBackend cpu{pool};
};

}  // namespace strata::split_testing
