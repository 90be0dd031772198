#include "backends/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/amx_matmat.h"
#include "backends/cpu/token_lanes.h"
#include "backends/cpu/attention.h"
#include "backends/cpu/gather_panels.h"
#include "backends/cpu/matvec.h"
#include "backends/cpu/sparse_ops.h"
#include "tensor/expert_mix.h"
#include "tensor/half.h"
#include "tensor/input_sparsity.h"
#include "tensor/interleaved_rows.h"
#include "tensor/quantize.h"

namespace strata {

namespace {

class CpuPreparedRows final : public PreparedRows {
 public:
  explicit CpuPreparedRows(int64_t max_rows) : inputs(static_cast<size_t>(max_rows)) {}
  int64_t rows() const override { return n; }
  std::span<const PreparedInput> span() const {
    return std::span<const PreparedInput>(inputs.data(), static_cast<size_t>(n));
  }
  std::vector<PreparedInput> inputs;
  int64_t n = 0;
};

const CpuPreparedRows& cpu_rows(const PreparedRows& p) {
  return static_cast<const CpuPreparedRows&>(p);
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

CpuKernels kernels_for(const CpuBackendOptions& o) {
  CpuKernels k = o.kernels != nullptr ? *o.kernels : best_kernels();
  if (!o.repack) k.matmat_q6_K_rows16 = nullptr;  // its rows through the row kernels
  return k;
}

}  // namespace

CpuBackend::CpuBackend(ThreadPool& pool, CpuBackendOptions options)
    : pool_(pool), kernels_(kernels_for(options)), options_(options) {}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::name() const {
  return fmt::format("cpu {}, {} threads", kernels_label(kernels_), pool_.size());
}

Buffer CpuBackend::allocate(uint64_t bytes, std::string_view) {
  AnonymousMemory memory(std::max<uint64_t>(bytes, 1));  // throws std::bad_alloc
  memory.populate(pool_);
  const Buffer b{Device::Host, memory.data(), bytes};
  const std::lock_guard lock(mutex_);
  allocated_ += memory.size();
  blocks_.emplace(memory.data(), std::move(memory));
  return b;
}

void CpuBackend::release(const Buffer& buffer) {
  const std::lock_guard lock(mutex_);
  const auto it = blocks_.find(buffer.data);
  if (it == blocks_.end()) return;
  allocated_ -= it->second.size();
  blocks_.erase(it);
}

uint64_t CpuBackend::allocated() const {
  const std::lock_guard lock(mutex_);
  return allocated_;
}

Layout CpuBackend::layout_for(const MatrixView& w, WeightUse use, bool repack) {
  // Whole products of Q4_0/Q8_0/Q4_K through the 16-row group kernels: one broadcast activation
  // quad multiplies 16 rows at once, no horizontal sums (interleaved_rows.h). Row-wise use
  // (gather, axpy) needs each row contiguous.
  const bool fits = interleavable(w.type) && w.rows % kInterleavedRows == 0 &&
                    w.row_bytes == row_bytes(w.type, w.cols);
  return repack && use == WeightUse::Whole && fits ? Layout::Interleaved16 : Layout::Rows;
}

uint64_t CpuBackend::scratch_bytes(int64_t max_rows, int64_t max_dim, int64_t n_ids, int64_t cols,
                                   int threads, bool float_weights) {
  // Per element: its int8 quant and its biased byte; per 32 elements a block (34 bytes), its
  // scale, scaled sum, -8 sum and Q8_1 sum (4 bytes each) and 8 lane offsets and 8 lane scales
  // (4 bytes each); and a Q8_K super-block (292 bytes) per 256 elements for K-quant readers.
  const uint64_t blocks = static_cast<uint64_t>((max_dim + kQK - 1) / kQK);
  const uint64_t super_blocks = static_cast<uint64_t>((max_dim + kQK_K - 1) / kQK_K);
  const uint64_t per_row = 2 * static_cast<uint64_t>(max_dim) + blocks * (34 + 4 * 4 + 16 * 4) +
                           super_blocks * sizeof(BlockQ8_K);
  const int64_t batch = std::min<int64_t>(max_rows, kBatchKernelTokens);
  const uint64_t float_forms = float_weights ? AmxBf16Activations::bytes(batch, max_dim) +
                                                   TokenLaneActivations::bytes(batch, max_dim, threads)
                                             : 0;
  return static_cast<uint64_t>(max_rows) * (per_row + sizeof(PreparedInput)) +
         axpy_scratch_bound(max_rows, n_ids, cols) +
         gather_scratch_bytes(max_rows, n_ids, cols, threads) +
         AmxInt8Activations::bytes(batch, max_dim) + float_forms;
}

std::unique_ptr<PreparedRows> CpuBackend::make_prepared(int64_t max_rows) {
  return std::make_unique<CpuPreparedRows>(max_rows);
}

void CpuBackend::prepare(PreparedRows& p, const float* x, int64_t dim, int64_t n,
                         std::span<const DType> readers) {
  auto& rows = static_cast<CpuPreparedRows&>(p);
  const bool q8 = std::any_of(readers.begin(), readers.end(), needs_q8_input);
  const bool q8k = std::any_of(readers.begin(), readers.end(), needs_q8k_input);
  for (int64_t b = 0; b < n; ++b)
    rows.inputs[static_cast<size_t>(b)].prepare(kernels_, x + b * dim, dim, q8, q8k);
  rows.n = n;
}

void CpuBackend::rms_norm(const float* x, const float* weight, float* out, int64_t n, int64_t dim,
                          float eps) {
  for (int64_t b = 0; b < n; ++b) {
    const float* xb = x + b * dim;
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += double{xb[i]} * xb[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) out[b * dim + i] = xb[i] * scale * weight[i];
  }
}

void CpuBackend::layer_norm(const float* x, const float* weight, const float* bias, float* out,
                            int64_t n, int64_t dim, float eps) {
  for (int64_t b = 0; b < n; ++b) {
    const float* xb = x + b * dim;
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += xb[i];
    const double mean = sum / static_cast<double>(dim);
    double var = 0.0;
    for (int64_t i = 0; i < dim; ++i) var += (xb[i] - mean) * (xb[i] - mean);
    const float scale = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(dim) + eps));
    const float m = static_cast<float>(mean);
    for (int64_t i = 0; i < dim; ++i)
      out[b * dim + i] = (xb[i] - m) * scale * weight[i] + (bias != nullptr ? bias[i] : 0.0f);
  }
}

void CpuBackend::add_bias(float* x, const float* bias, int64_t n, int64_t dim) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < dim; ++i) x[b * dim + i] += bias[i];
}

void CpuBackend::add_bias_of(float* y, const float* bias, std::span<const int32_t> ids, int64_t n,
                             int64_t stride) {
  for (int64_t b = 0; b < n; ++b)
    for (size_t k = 0; k < ids.size(); ++k) y[b * stride + static_cast<int64_t>(k)] += bias[ids[k]];
}

void CpuBackend::matmul(std::span<const RowsJob> jobs, const PreparedRows& x) {
  matmat_multi(kernels_, jobs, cpu_rows(x).span(), pool_);
}

void CpuBackend::gather(std::span<const RowsJob> jobs, std::span<const int32_t> rows,
                        const PreparedRows& x, const uint8_t* need, int64_t need_stride) {
  gather_matmat(kernels_, jobs, rows, cpu_rows(x).span(), pool_, need, need_stride);
}

void CpuBackend::axpy(const MatrixView& wt, std::span<const int32_t> rows, const float* c,
                      int64_t c_stride, int64_t n, float* out, int64_t out_stride,
                      std::span<const int32_t> neurons, int64_t) {
  axpy_rows(kernels_, wt, rows, c, c_stride, n, out, out_stride, pool_, neurons);
}

void CpuBackend::rope_and_store(float* q, float* k, const float* v, int64_t n, const HeadShape& s,
                                const RopeTable& rope, const KvLayer& kv,
                                const TokenPlaces& places) {
  const int64_t hd = s.head_dim, q_dim = s.q_dim(), kv_dim = s.kv_dim(), half = rope.half;
  const bool k16 = kv.k_type == DType::F16, v16 = kv.v_type == DType::F16;
  const bool k32 = kv.k_type == DType::F32, v32 = kv.v_type == DType::F32;
  for (int64_t b = 0; b < n; ++b) {
    const float* cs = rope.cos + b * half;
    const float* sn = rope.sin + b * half;
    // Element i of a pair and its partner: adjacent (2i, 2i + 1) or NeoX's (i, i + half).
    const int64_t first = rope.style == RopeStyle::Neox ? 1 : 2;
    const int64_t partner = rope.style == RopeStyle::Neox ? half : 1;
    auto rotate = [&](float* head) {
      for (int64_t i = 0; i < half; ++i) {
        float* e = head + first * i;
        const float a = e[0], c = e[partner];
        e[0] = a * cs[i] - c * sn[i];
        e[partner] = a * sn[i] + c * cs[i];
      }
    };
    for (int64_t h = 0; h < s.n_head; ++h) rotate(q + b * q_dim + h * hd);
    for (int64_t h = 0; h < s.n_head_kv; ++h) rotate(k + b * kv_dim + h * hd);
    const int64_t at = (places.base[b] + places.pos[b]) * kv.kv_dim;  // the cache's row width
    const float* kb = k + b * kv_dim;
    const float* vb = v + b * kv_dim;
    if (k16)
      for (int64_t i = 0; i < kv_dim; ++i) static_cast<uint16_t*>(kv.k)[at + i] = f32_to_f16(kb[i]);
    else if (k32)
      std::copy_n(kb, kv_dim, static_cast<float*>(kv.k) + at);
    else  // a block type: the row quantized as llama.cpp's -ctk q8_0 stores it
      dtype_info(kv.k_type).quantize(kb, static_cast<uint8_t*>(kv.k) + row_bytes(kv.k_type, at), kv_dim);
    if (v16)
      for (int64_t i = 0; i < kv_dim; ++i) static_cast<uint16_t*>(kv.v)[at + i] = f32_to_f16(vb[i]);
    else if (v32)
      std::copy_n(vb, kv_dim, static_cast<float*>(kv.v) + at);
    else
      dtype_info(kv.v_type).quantize(vb, static_cast<uint8_t*>(kv.v) + row_bytes(kv.v_type, at), kv_dim);
  }
}

void CpuBackend::attention(const float* q, int64_t n, const HeadShape& s, const ScoreRule& rule,
                           const KvLayer& kv, const TokenPlaces& places, int64_t, float*,
                           float* out) {
  // Runs of a sequence's consecutive tokens, the query heads sharing a KV head at a time
  // (attention.h); tasks go KV head by KV head and are cut by their positions (a prompt's later
  // tokens see more).
  const int group = static_cast<int>(s.n_head / s.n_head_kv);
  const int64_t hd = s.head_dim, q_dim = s.q_dim();
  const int64_t* origin = places.origin != nullptr ? places.origin : places.base;
  const std::vector<TokenRun> runs = attention_runs(origin, n, kAttentionRunTokens);
  const auto n_runs = static_cast<int64_t>(runs.size());
  std::vector<int64_t> cumulative(static_cast<size_t>(s.n_head_kv * n_runs));
  int64_t total = 0;
  for (size_t t = 0; t < cumulative.size(); ++t) {
    const TokenRun& run = runs[t % runs.size()];
    for (int64_t b = run.begin; b < run.end; ++b) total += places.pos[b] + kAttentionPanel;
    cumulative[t] = total;
  }
  pool_.parallel_for_weighted(cumulative, [&](int64_t t0, int64_t t1, int) {
    std::vector<QueryRow> rows;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t kvh = t / n_runs;
      const TokenRun& run = runs[static_cast<size_t>(t % n_runs)];
      rows.clear();
      for (int64_t b = run.begin; b < run.end; ++b)
        for (int g = 0; g < group; ++g) {
          const int64_t at = b * q_dim + (kvh * group + g) * hd;
          const float sink = rule.sinks != nullptr ? rule.sinks[kvh * group + g] : -INFINITY;
          rows.push_back(
              {q + at, out + at, places.base[b], places.base[b] + places.pos[b], sink});
        }
      const auto head_at = static_cast<uint64_t>(kvh * hd);
      const CachedHead head{static_cast<const uint8_t*>(kv.k) + row_bytes(kv.k_type, head_at),
                            static_cast<const uint8_t*>(kv.v) + row_bytes(kv.v_type, head_at), kv.k_type,
                            kv.v_type, kv.kv_dim};
      attend_rows(kernels_, rows, head, origin[run.begin], hd, rule.scale, rule.softcap);
    }
  });
}

void CpuBackend::activation(FfnActivation act, const float* gate, const float* up, float* h,
                            int64_t count) {
  switch (act) {
    case FfnActivation::SwiGLU:
      for (int64_t i = 0; i < count; ++i) h[i] = silu(gate[i]) * up[i];
      break;
    case FfnActivation::ReGLU:
      for (int64_t i = 0; i < count; ++i) h[i] = gate[i] > 0.0f ? gate[i] * up[i] : 0.0f;
      break;
    case FfnActivation::DReLU:
      for (int64_t i = 0; i < count; ++i)
        h[i] = (gate[i] > 0.0f && up[i] > 0.0f) ? gate[i] * up[i] : 0.0f;
      break;
    case FfnActivation::GeGLU:
      for (int64_t i = 0; i < count; ++i) h[i] = gelu_tanh(gate[i]) * up[i];
      break;
    case FfnActivation::ReLU:
      for (int64_t i = 0; i < count; ++i) h[i] = std::max(up[i], 0.0f);
      break;
    case FfnActivation::GELU:
      for (int64_t i = 0; i < count; ++i) h[i] = gelu_tanh(up[i]);
      break;
    case FfnActivation::SwiGLUOai:
      for (int64_t i = 0; i < count; ++i) h[i] = swiglu_oai(gate[i], up[i]);
      break;
  }
}

void CpuBackend::relu(float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] = std::max(x[i], 0.0f);
}

void CpuBackend::threshold(const float* scores, float threshold, bool strict, uint8_t* mask,
                           int64_t count) {
  if (strict)
    for (int64_t i = 0; i < count; ++i) mask[i] = scores[i] > threshold;
  else
    for (int64_t i = 0; i < count; ++i) mask[i] = scores[i] >= threshold;
}

int64_t CpuBackend::select_union(const uint8_t* mask, int64_t n, int64_t ff, int32_t* ids,
                                 uint8_t* need, uint64_t* selected) {
  // Ascending ids: rows are read in memory order.
  int64_t n_ids = 0;
  if (n == 1) {  // decode: the union is the token's own marks, every listed id needed
    for (int64_t i = 0; i < ff; ++i) {
      ids[n_ids] = static_cast<int32_t>(i);
      n_ids += mask[i] != 0;
    }
    std::fill(need, need + n_ids, uint8_t{1});
    *selected = static_cast<uint64_t>(n_ids);
    return n_ids;
  }
  for (int64_t i = 0; i < ff; ++i) {
    bool any = false;
    for (int64_t b = 0; b < n && !any; ++b) any = mask[b * ff + i] != 0;
    if (any) ids[n_ids++] = static_cast<int32_t>(i);
  }
  uint64_t count = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < n_ids; ++k) {
      need[b * ff + k] = mask[b * ff + ids[k]];
      count += need[b * ff + k];
    }
  *selected = count;
  return n_ids;
}

void CpuBackend::select_columns(const float* full, std::span<const int32_t> ids, int64_t n,
                                int64_t stride, float* out) {
  const int64_t n_ids = static_cast<int64_t>(ids.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < n_ids; ++k) out[b * stride + k] = full[b * stride + ids[k]];
}

void CpuBackend::sparsify(float* x, int64_t count, float threshold, uint64_t* kept, uint8_t* mask) {
  uint64_t nonzero = 0;
  if (mask == nullptr) {
    for (int64_t i = 0; i < count; ++i) {
      x[i] = teal_keep(x[i], threshold);
      nonzero += x[i] != 0.0f;
    }
  } else {
    for (int64_t i = 0; i < count; ++i) {
      x[i] = teal_keep(x[i], threshold);
      mask[i] = x[i] != 0.0f;
      nonzero += mask[i];
    }
  }
  *kept += nonzero;
}

void CpuBackend::sparsify_gate(FfnActivation act, float* gate, int64_t count, float threshold,
                               uint64_t* kept) {
  uint64_t nonzero = 0;
  for (int64_t i = 0; i < count; ++i) {
    gate[i] = cats_keep(act, gate[i], threshold);
    nonzero += gate[i] != 0.0f;
  }
  *kept += nonzero;
}

void CpuBackend::keep_needed(float* h, const uint8_t* need, int64_t n, int64_t stride,
                             int64_t begin, int64_t end, uint64_t* counter) {
  uint64_t nonzero = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = begin; k < end; ++k) {
      float& v = h[b * stride + k];
      if (need != nullptr && need[b * stride + k] == 0) v = 0.0f;
      nonzero += v != 0.0f;
    }
  *counter += nonzero;
}

void CpuBackend::add(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

void CpuBackend::scale(float* x, float factor, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] *= factor;
}

void CpuBackend::mix_experts(const float* y, const float* weights, int64_t n, int64_t k,
                             int64_t dim, float* out) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < dim; ++j)
      out[b * dim + j] = mix_value(y + b * k * dim + j, weights + b * k, k, dim);
}

void CpuBackend::mask_unchosen(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                               int64_t expert_ff, int64_t n_expert) {
  // Whole experts at a time: an unchosen expert's entries are cleared in one memset.
  for (int64_t b = 0; b < n; ++b)
    for (int64_t e = 0; e < n_expert && e * expert_ff < stride; ++e)
      if (weights[b * n_expert + e] == 0.0f)
        std::memset(mask + b * stride + e * expert_ff, 0,
                    static_cast<size_t>(std::min(expert_ff, stride - e * expert_ff)));
}

void CpuBackend::scale_by_expert(float* h, std::span<const int32_t> ids, const float* weights,
                                 int64_t n, int64_t stride, int64_t expert_ff, int64_t n_expert) {
  for (int64_t b = 0; b < n; ++b)
    for (size_t k = 0; k < ids.size(); ++k)
      h[b * stride + static_cast<int64_t>(k)] *=
          neuron_expert_weight(weights + b * n_expert, ids[k], expert_ff);
}

void CpuBackend::copy(void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return;  // an empty vector's data() may be null
  std::memcpy(dst, src, bytes);
}

void CpuBackend::dequantize_row(DType type, const uint8_t* row, float* out, int64_t n) {
  strata::dequantize_row(type, row, out, n);
}

Event CpuBackend::record() {
  return Event{
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(),
      0};
}

}  // namespace strata
