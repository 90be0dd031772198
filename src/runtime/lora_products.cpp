#include "runtime/lora_products.h"

#include <algorithm>

#include "core/error.h"

namespace strata {

namespace {

// The largest rank and output width of the adapters' pairs: what the buffers are sized by.
struct Widest {
  int64_t rank = 1, out = 1;
};
Widest widest(const LoraAdapters& adapters) {
  Widest w{std::max<int64_t>(1, adapters.output.rank), std::max<int64_t>(1, adapters.output.n_out)};
  for (const auto& layer : adapters.layers)
    for (const LoraPair& p : layer) {
      w.rank = std::max(w.rank, p.rank);
      w.out = std::max(w.out, p.n_out);
    }
  return w;
}

}  // namespace

LoraProducts::LoraProducts(const LoraAdapters& adapters, Backend& backend, int64_t max_rows)
    : adapters_(adapters), be_(backend), max_rows_(max_rows) {
  if (be_.device() != Device::Host) fail("LoRA adapters run on the CPU backend only");
  const int64_t rank = widest(adapters_).rank;
  in_ = be_.make_prepared(max_rows_);
  t_.resize(static_cast<size_t>(max_rows_ * rank));
  ranks_.resize(static_cast<size_t>(rank));
  for (size_t r = 0; r < ranks_.size(); ++r) ranks_[r] = static_cast<int32_t>(r);
}

uint64_t LoraProducts::scratch_bytes(const LoraAdapters& adapters, int64_t max_rows) {
  if (adapters.empty()) return 0;
  const Widest w = widest(adapters);
  // t_ and tmp_, and the prepared rows (f32 inputs of up to the widest n_in, at most n_out).
  return static_cast<uint64_t>(max_rows) * static_cast<uint64_t>(2 * w.rank + 2 * w.out) *
         sizeof(float);
}

float* LoraProducts::scratch(int64_t values) {
  if (tmp_.size() < static_cast<size_t>(values)) tmp_.resize(static_cast<size_t>(values));
  return tmp_.data();
}

void LoraProducts::low_rank(const LoraPair& p, const float* x, int64_t n) {
  if (n > max_rows_) fail("LoRA products: a batch of {} rows (at most {})", n, max_rows_);
  const MatrixView a = p.a_view();
  be_.prepare(*in_, x, p.n_in, n, {p.type});
  const RowsJob job{&a, t_.data(), p.rank};
  be_.matmul(std::span(&job, 1), *in_);
  scale(p, n);
}

void LoraProducts::scale(const LoraPair& p, int64_t n) {
  // Each adapter's s on its share of the rank (host memory: the CPU backend's).
  for (int64_t b = 0; b < n; ++b)
    for (int64_t r = 0; r < p.rank; ++r)
      t_[static_cast<size_t>(b * p.rank + r)] *= p.scale[static_cast<size_t>(r)];
}

void LoraProducts::add_rows_of(float* y, int64_t y_stride, const float* t, int64_t t_stride,
                               int64_t n, int64_t count) {
  if (y_stride == count && t_stride == count) {
    be_.add(y, t, n * count);
    return;
  }
  for (int64_t b = 0; b < n; ++b) be_.add(y + b * y_stride, t + b * t_stride, count);
}

void LoraProducts::add(const LoraPair* p, const float* x, int64_t n, float* y, int64_t y_stride) {
  if (p == nullptr || n == 0) return;
  low_rank(*p, x, n);
  add_b_columns(*p, n, y, y_stride);
}

void LoraProducts::add_b_columns(const LoraPair& p, int64_t n, float* y, int64_t y_stride) {
  // B t as the sum of B's columns weighted by t: rank long rows, not n_out short ones.
  float* tmp = scratch(n * p.n_out);
  be_.axpy(p.b_t_view(), std::span(ranks_.data(), static_cast<size_t>(p.rank)), t_.data(), p.rank,
           n, tmp, p.n_out, {}, p.rank);
  add_rows_of(y, y_stride, tmp, p.n_out, n, p.n_out);
}

void LoraProducts::add_rows(const LoraPair* p, const float* x, int64_t n,
                            std::span<const int32_t> ids, const uint8_t* need, int64_t stride,
                            float* y) {
  if (p == nullptr || n == 0 || ids.empty()) return;
  low_rank(*p, x, n);
  be_.prepare(*in_, t_.data(), p->rank, n, {p->type});
  float* tmp = scratch(n * stride);
  const MatrixView b = p->b_view();
  const RowsJob job{&b, tmp, stride};
  be_.gather(std::span(&job, 1), ids, *in_, need, stride);
  add_rows_of(y, stride, tmp, stride, n, static_cast<int64_t>(ids.size()));
}

void LoraProducts::add_columns(const LoraPair* p, std::span<const int32_t> ids, const float* c,
                               int64_t c_stride, int64_t n, float* out, int64_t out_stride) {
  if (p == nullptr || n == 0 || ids.empty()) return;
  if (n > max_rows_) fail("LoRA products: a batch of {} rows (at most {})", n, max_rows_);
  // A c over the listed neurons: the sum of their columns of A, weighted.
  be_.axpy(p->a_t_view(), ids, c, c_stride, n, t_.data(), p->rank, {}, p->n_in);
  scale(*p, n);
  add_b_columns(*p, n, out, out_stride);
}

}  // namespace strata
