// The CPU backend: the Backend interface over the kernel table (kernels.h, chosen for this CPU
// at run time), the thread pool and Q8 activation preparation (matvec.h), all private to it.
// Every op runs on the calling thread and the pool and is done when it returns.
#pragma once

#include <mutex>
#include <unordered_map>

#include "backends/backend.h"
#include "backends/cpu/kernels.h"
#include "core/anonymous_memory.h"
#include "core/thread_pool.h"

namespace strata {

struct CpuBackendOptions {
  // Interleave Q4_0/Q8_0/Q4_K matrices multiplied whole by 16 rows (tensor/interleaved_rows.h),
  // and repack Q6_K rows per prompt batch; off: the file's rows (llama.cpp's --no-repack).
  bool repack = true;
  const CpuKernels* kernels = nullptr;  // null: best_kernels()
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ThreadPool& pool, CpuBackendOptions options = {});
  ~CpuBackend() override;

  Device device() const override { return Device::Host; }
  std::string name() const override;
  using Backend::allocate;
  Buffer allocate(uint64_t bytes, std::string_view what) override;
  void release(const Buffer& buffer) override;
  uint64_t allocated() const override;
  Layout preferred_layout(const MatrixView& w, WeightUse use) const override {
    return layout_for(w, use, options_.repack);
  }
  // Host memory of a make_prepared(max_rows) batch after rows of up to max_dim elements were
  // prepared for quantized weights (PreparedInput's Q8 blocks, scales and lanes), plus the
  // axpy's scratch the calling thread keeps for n_ids neurons of `cols` (sparse_ops.h), the
  // gather's for n_ids rows of `cols` on `threads` (gather_panels.h), AMX int8 activations,
  // and where the model has float matrices (`float_weights`) the float batches' forms (AMX-BF16
  // split, token lanes) of max_rows x max_dim: for the placement inventory.
  static uint64_t scratch_bytes(int64_t max_rows, int64_t max_dim, int64_t n_ids, int64_t cols,
                                int threads, bool float_weights);
  // The decision itself, for planning before a backend exists.
  static Layout layout_for(const MatrixView& w, WeightUse use, bool repack);

  std::unique_ptr<PreparedRows> make_prepared(int64_t max_rows) override;
  using Backend::prepare;
  void prepare(PreparedRows& p, const float* x, int64_t dim, int64_t n,
               std::span<const DType> readers) override;
  void rms_norm(const float* x, const float* weight, float* out, int64_t n, int64_t dim,
                float eps) override;
  void layer_norm(const float* x, const float* weight, const float* bias, float* out, int64_t n,
                  int64_t dim, float eps) override;
  void add_bias(float* x, const float* bias, int64_t n, int64_t dim) override;
  void add_bias_of(float* y, const float* bias, std::span<const int32_t> ids, int64_t n,
                   int64_t stride) override;
  void matmul(std::span<const RowsJob> jobs, const PreparedRows& x) override;
  void gather(std::span<const RowsJob> jobs, std::span<const int32_t> rows, const PreparedRows& x,
              const uint8_t* need, int64_t need_stride) override;
  void axpy(const MatrixView& wt, std::span<const int32_t> rows, const float* c, int64_t c_stride,
            int64_t n, float* out, int64_t out_stride, std::span<const int32_t> neurons,
            int64_t id_bound) override;
  void rope_and_store(float* q, float* k, const float* v, int64_t n, const HeadShape& s,
                      const RopeTable& rope, const KvLayer& kv, const TokenPlaces& at) override;
  void attention(const float* q, int64_t n, const HeadShape& s, const ScoreRule& rule,
                 const KvLayer& kv, const TokenPlaces& at, int64_t n_ctx, float* scores,
                 float* out) override;
  void activation(FfnActivation act, const float* gate, const float* up, float* h,
                  int64_t count) override;
  void relu(float* x, int64_t count) override;
  void threshold(const float* scores, float threshold, bool strict, uint8_t* mask,
                 int64_t count) override;
  int64_t select_union(const uint8_t* mask, int64_t n, int64_t ff, int32_t* ids, uint8_t* need,
                       uint64_t* selected) override;
  void select_columns(const float* full, std::span<const int32_t> ids, int64_t n, int64_t stride,
                      float* out) override;
  void sparsify(float* x, int64_t count, float threshold, uint64_t* kept,
                uint8_t* mask) override;
  void sparsify_gate(FfnActivation act, float* gate, int64_t count, float threshold,
                     uint64_t* kept) override;
  void keep_needed(float* h, const uint8_t* need, int64_t n, int64_t stride, int64_t begin,
                   int64_t end, uint64_t* nonzero) override;
  void add(float* x, const float* y, int64_t count) override;
  void scale(float* x, float factor, int64_t count) override;
  void mask_unchosen(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                     int64_t expert_ff, int64_t n_expert) override;
  void scale_by_expert(float* h, std::span<const int32_t> ids, const float* weights, int64_t n,
                       int64_t stride, int64_t expert_ff, int64_t n_expert) override;
  void mix_experts(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim,
                   float* out) override;
  void copy(void* dst, const void* src, uint64_t bytes) override;
  void upload(void* dst, const void* host, uint64_t bytes) override { copy(dst, host, bytes); }
  void download(void* host, const void* src, uint64_t bytes) override { copy(host, src, bytes); }
  void dequantize_row(DType type, const uint8_t* row, float* out, int64_t n) override;

  Event record() override;
  double elapsed(const Event& from, const Event& to) const override {
    return to.seconds - from.seconds;
  }
  void synchronize() override {}

 private:
  ThreadPool& pool_;
  const CpuKernels kernels_;  // a copy: without repacking, the batch kernels that repack are off
  CpuBackendOptions options_;
  mutable std::mutex mutex_;  // allocations may come from several sessions' threads
  std::unordered_map<uint8_t*, AnonymousMemory> blocks_;
  uint64_t allocated_ = 0;
};

}  // namespace strata
