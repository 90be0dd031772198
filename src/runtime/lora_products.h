// LoRA adapters' products (model/lora_adapter.h) on the CPU backend: each adds B (A x) to a
// product the layer computed from the base weights, for whole rows (the dense products) or for
// a neuron list (the sparse FFN: B's rows of the neurons it computes, and for ffn_down A's
// columns of the neurons that fired), so an adapter's rows follow the neurons they modify.
// A batch's result equals the adapters merged into the weights, up to rounding.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "model/lora_adapter.h"

namespace strata {

class LoraProducts {
 public:
  // `backend`: the host's (the pairs live in host memory).
  LoraProducts(const LoraAdapters& adapters, Backend& backend, int64_t max_rows);

  const LoraPair* find(int64_t layer, LayerMatrix role) const {
    return adapters_.find(layer, role);
  }
  const LoraPair* output() const { return adapters_.find_output(); }
  // The buffers a session's products hold for batches of up to max_rows (for plans).
  static uint64_t scratch_bytes(const LoraAdapters& adapters, int64_t max_rows);

  // y[b * y_stride + j] += (B (A x_b))[j] for n rows x_b of p->n_in values; nothing when p is
  // null.
  void add(const LoraPair* p, const float* x, int64_t n, float* y, int64_t y_stride);
  // y[b * stride + k] += B.row(ids[k]) . (A x_b) for the listed outputs (the sparse FFN's gate
  // or up values of its neurons, compact); with `need` ([n][stride], as the gather's) only
  // where it is non-zero.
  void add_rows(const LoraPair* p, const float* x, int64_t n, std::span<const int32_t> ids,
                const uint8_t* need, int64_t stride, float* y);
  // out_b += B (sum over k of c[b * c_stride + k] * A.column(ids[k])): ffn_down over the listed
  // neurons' activations (compact), the rest being zero.
  void add_columns(const LoraPair* p, std::span<const int32_t> ids, const float* c,
                   int64_t c_stride, int64_t n, float* out, int64_t out_stride);

 private:
  // t_ = scale * (A x) for n rows.
  void low_rank(const LoraPair& p, const float* x, int64_t n);
  void scale(const LoraPair& p, int64_t n);  // t_ *= p.scale
  // y[b * y_stride + j] += (B t_b)[j].
  void add_b_columns(const LoraPair& p, int64_t n, float* y, int64_t y_stride);
  float* scratch(int64_t values);  // tmp_ of at least `values`
  void add_rows_of(float* y, int64_t y_stride, const float* t, int64_t t_stride, int64_t n,
                   int64_t count);

  const LoraAdapters& adapters_;
  Backend& be_;
  int64_t max_rows_;
  std::unique_ptr<PreparedRows> in_;
  std::vector<float> t_, tmp_;
  std::vector<int32_t> ranks_;  // 0, 1, ...: every column of B
};

}  // namespace strata
