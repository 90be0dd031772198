// The CUDA backend's host side: one stream, one allocator with the budget, cuBLAS for batched
// products of more than kGemmMinTokens tokens (f16 tensor cores: F16 weights as they are,
// the other types converted to f16 a chunk of rows at a time, F32 by SGEMM), the kernels of
// launch.h for the rest. Ops are queued on the stream; select_union waits for its count,
// download for its bytes, synchronize for everything.
//
// Built twice (cuda_api.h): against the CUDA runtime and cuBLAS for a GPU, and with
// STRATA_CUDA_EMU against the emulator (emu/), where the same code registers as "cuda-emu".
#include "backends/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/cuda/block_math.h"
#include "backends/cuda/cublas_api.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/device_pool.h"
#include "backends/cuda/launch.h"
#include "core/error.h"
#include "tensor/quantize.h"

namespace strata::STRATA_CUDA_NS {

void kernel_failure(const std::string& message) {
  throw Error(message);
}

void check_launch(const char* what, cudaStream_t stream) {
  cudaError_t e = cudaGetLastError();
  const char* sync = std::getenv("STRATA_CUDA_SYNC");
  if (e == cudaSuccess && sync != nullptr && std::string_view(sync) == "1") {
    e = cudaStreamSynchronize(stream);
    cudaGetLastError();  // taken here, not again by the next launch's check
  }
  if (e != cudaSuccess) kernel_failure(fmt::format("CUDA {}: {}", what, cudaGetErrorString(e)));
}

namespace {

using STRATA_CUDA_NS::check;  // the runtime calls' (cuda_device.h), beside cuBLAS's below

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuBLAS {}: status {}", what, static_cast<int>(s));
}

std::string mib(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / 1048576.0);
}

// Scratch the backend holds from its creation (so a budget that cannot hold it fails first).
constexpr uint64_t kAxpyScratch = uint64_t{32} << 20;
constexpr uint64_t kHalfActivations = uint64_t{64} * 65536 * 2;  // 64 tokens of 64Ki values
constexpr uint64_t kHalfWeights = uint64_t{32} << 20;            // a chunk of rows as f16
constexpr uint64_t kCublasWorkspace = uint64_t{32} << 20;
constexpr uint64_t kCounts = 64;
constexpr int64_t kGemmMaxTokens = 16384;  // the f16 activations' scales: one float a token
constexpr uint64_t kScales = kGemmMaxTokens * sizeof(float);
// What the CUDA context and cuBLAS's handle take outside the allocator, kept free.
constexpr uint64_t kContextReserve = uint64_t{512} << 20;
// Batches above this many tokens multiply through cuBLAS.
constexpr int64_t kGemmMinTokens = kTile + 1;
constexpr size_t kEvents = 4096;                       // recorded points kept (a ring)
constexpr uint64_t kStagingBytes = uint64_t{4} << 20;  // a pinned upload buffer (two of them)
#if defined(STRATA_CUDA_EMU)
constexpr const char* kName = "cuda-emu";
constexpr bool kEmulated = true;  // device memory is host memory (the pool poisons it for ASan)
#else
constexpr const char* kName = "cuda";
constexpr bool kEmulated = false;
#endif
// The budget rounded down to the driver's granule, and each buffer's 256-byte alignment: what
// the pool may lose of a budget, counted beside the backend's scratch.
constexpr uint64_t kPoolSlack = uint64_t{4} << 20;

class CudaPrepared final : public PreparedRows {
 public:
  int64_t rows() const override { return n; }
  const float* x = nullptr;
  int64_t dim = 0, n = 0;
};

// `column_groups`: the op reads a column-group copy too (the axpy: TEAL's input-sparse products).
Rows rows_of(const MatrixView& w, const char* op, bool column_groups = false) {
  if (w.device != Device::Accelerator) fail("CUDA {}: a weight in {} memory", op, device_name(w.device));
  const bool groups = w.layout == Layout::ColumnGroups && has_column_groups(w.type);
  if (w.layout != Layout::Rows && !(column_groups && groups))
    fail("CUDA {}: the CUDA kernels read weights in rows", op);
  if (!cuda_math::cuda_weight_type(w.type))
    fail("the CUDA backend has no kernels for {} weights", dtype_name(w.type));
  return Rows{w.type, w.data, w.rows, w.cols, w.row_bytes, groups};
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& o) {
    try {
      acquire(o);
    } catch (...) {
      free_all();  // what was made before the failure (a budget below the scratch, ...)
      throw;
    }
  }

  ~CudaBackend() override { free_all(); }

  Device device() const override { return Device::Accelerator; }
  std::string name() const override {
    return fmt::format("{} {} (sm_{}{}, {} free of {}), budget {}", kName, info_.name, info_.major,
                       info_.minor, mib(info_.free_bytes), mib(info_.total_bytes), mib(budget_));
  }

  using Backend::allocate;
  Buffer allocate(uint64_t bytes, std::string_view what) override {
    const std::lock_guard lock(mutex_);
    uint8_t* p = pool_ != nullptr ? pool_->allocate(bytes) : nullptr;
    if (p == nullptr) {
      const uint64_t left = pool_ != nullptr ? pool_->largest_free() : 0;
      fail("{} needs {}, more than the {} left of the GPU's {} budget", what, mib(bytes), mib(left),
           mib(budget_));
    }
    check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemset");
    return Buffer{Device::Accelerator, p, bytes};
  }

  void release(const Buffer& b) override {
    if (b.data == nullptr || pool_ == nullptr) return;
    const std::lock_guard lock(mutex_);
    cudaStreamSynchronize(stream_);  // queued work may still read it
    pool_->release(b.data);
  }

  uint64_t allocated() const override {
    const std::lock_guard lock(mutex_);
    return pool_ != nullptr ? pool_->in_use() : 0;
  }

  void upload(void* dst, const void* host, uint64_t bytes) override {
    // `host` may be reused when this returns (the interface's contract), which CUDA does not
    // promise for a copy from pageable memory: the bytes go through pinned staging buffers,
    // each reused once the copy queued from it has run.
    const auto* from = static_cast<const uint8_t*>(host);
    auto* to = static_cast<uint8_t*>(dst);
    for (uint64_t done = 0; done < bytes;) {
      const uint64_t n = std::min(kStagingBytes, bytes - done);
      Staging& s = staging_[next_staging_++ % staging_.size()];
      check(cudaEventSynchronize(s.copied), "upload");
      std::memcpy(s.bytes, from + done, n);
      check(cudaMemcpyAsync(to + done, s.bytes, n, cudaMemcpyHostToDevice, stream_), "upload");
      check(cudaEventRecord(s.copied, stream_), "upload");
      done += n;
    }
  }

  void download(void* host, const void* src, uint64_t bytes) override {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_), "download");
    synchronize();
  }

  bool reads_weights(DType type) const override { return cuda_math::cuda_weight_type(type); }
  Layout preferred_layout(const MatrixView&, WeightUse) const override { return Layout::Rows; }

  std::unique_ptr<PreparedRows> make_prepared(int64_t) override {
    return std::make_unique<CudaPrepared>();
  }

  using Backend::prepare;
  void prepare(PreparedRows& p, const float* x, int64_t dim, int64_t n,
               std::span<const DType>) override {
    // Products read x as it is (f32): ops are stream-ordered, so x is what it was here until an
    // op queued after the products changes it.
    auto& c = static_cast<CudaPrepared&>(p);
    c.x = x;
    c.dim = dim;
    c.n = n;
  }

  void rms_norm(const float* x, const float* weight, float* out, int64_t n, int64_t dim,
                float eps) override {
    launch_rms_norm(x, weight, out, n, dim, eps, stream_);
  }

  void layer_norm(const float* x, const float* weight, const float* bias, float* out, int64_t n,
                  int64_t dim, float eps) override {
    launch_layer_norm(x, weight, bias, out, n, dim, eps, stream_);
  }
  void add_bias(float* x, const float* bias, int64_t n, int64_t dim) override {
    launch_add_bias(x, bias, n, dim, stream_);
  }
  void add_bias_of(float* y, const float* bias, std::span<const int32_t> ids, int64_t n,
                   int64_t stride) override {
    launch_add_bias_of(y, bias, ids.data(), static_cast<int64_t>(ids.size()), n, stride, stream_);
  }

  void matmul(std::span<const RowsJob> jobs, const PreparedRows& xp) override {
    const auto& x = static_cast<const CudaPrepared&>(xp);
    bool halved = false;  // x as f16, made once for the jobs that need it
    for (const RowsJob& j : jobs) {
      const Rows w = rows_of(*j.w, "matmul");
      if (w.cols != x.dim) fail("CUDA matmul: rows of {} values, activations of {}", w.cols, x.dim);
      if (x.n >= kGemmMinTokens && fits_gemm(w, x)) {
        gemm(w, x, j.y, j.y_stride, halved);
        continue;
      }
      launch_products(w, nullptr, w.rows, x.x, x.n, nullptr, 0, j.y, j.y_stride, stream_);
    }
  }

  void gather(std::span<const RowsJob> jobs, std::span<const int32_t> rows, const PreparedRows& xp,
              const uint8_t* need, int64_t need_stride) override {
    const auto& x = static_cast<const CudaPrepared&>(xp);
    for (const RowsJob& j : jobs) {
      const Rows w = rows_of(*j.w, "gather");
      if (w.cols != x.dim) fail("CUDA gather: rows of {} values, activations of {}", w.cols, x.dim);
      launch_products(w, rows.data(), static_cast<int64_t>(rows.size()), x.x, x.n, need,
                      need_stride, j.y, j.y_stride, stream_);
    }
  }

  void axpy(const MatrixView& wt, std::span<const int32_t> rows, const float* c, int64_t c_stride,
            int64_t n, float* out, int64_t out_stride, std::span<const int32_t> neurons,
            int64_t id_bound) override {
    // Rows that are slots (a VRAM store) carry their neuron ids, which fix the buckets.
    const Rows w = rows_of(wt, "axpy", /*column_groups=*/true);
    launch_axpy(w, rows.data(), neurons.empty() ? nullptr : neurons.data(), id_bound,
                static_cast<int64_t>(rows.size()), c, c_stride, n, out, out_stride,
                reinterpret_cast<float*>(axpy_scratch_.data), axpy_scratch_.bytes, stream_);
  }

  void rope_and_store(float* q, float* k, const float* v, int64_t n, const HeadShape& s,
                      const RopeTable& rope, const KvLayer& kv, const TokenPlaces& at) override {
    for (int64_t t0 = 0; t0 < n; t0 += kMaxPlaces) {
      const int64_t m = std::min<int64_t>(kMaxPlaces, n - t0);
      launch_rope_store(q + t0 * s.q_dim(), k + t0 * s.kv_dim(), v + t0 * s.kv_dim(), m,
                        static_cast<int>(s.n_head), static_cast<int>(s.n_head_kv),
                        static_cast<int>(s.head_dim), rope.cos + t0 * rope.half,
                        rope.sin + t0 * rope.half, static_cast<int>(rope.half),
                        rope.style == RopeStyle::Neox, kv.k, kv.v, kv.k_type, kv.v_type,
                        kv.kv_dim, places(at, t0, m), stream_);
    }
  }

  void attention(const float* q, int64_t n, const HeadShape& s, const ScoreRule& rule,
                 const KvLayer& kv, const TokenPlaces& at, int64_t n_ctx, float* scores,
                 float* out) override {
    for (int64_t t0 = 0; t0 < n; t0 += kMaxPlaces) {
      const int64_t m = std::min<int64_t>(kMaxPlaces, n - t0);
      launch_attention(q + t0 * s.q_dim(), m, static_cast<int>(s.n_head),
                       static_cast<int>(s.n_head_kv), static_cast<int>(s.head_dim), rule.scale,
                       rule.softcap, rule.sinks, kv.k, kv.v,
                       kv.k_type, kv.v_type, kv.kv_dim,
                       places(at, t0, m), n_ctx, scores + t0 * s.n_head * n_ctx,
                       out + t0 * s.q_dim(), stream_);
    }
  }

  void activation(FfnActivation act, const float* gate, const float* up, float* h,
                  int64_t count) override {
    launch_activation(act, ffn_has_gate(act) ? gate : nullptr, up, h, count, stream_);
  }
  void relu(float* x, int64_t count) override { launch_relu(x, count, stream_); }
  void threshold(const float* scores, float threshold, bool strict, uint8_t* mask,
                 int64_t count) override {
    launch_threshold(scores, threshold, strict, mask, count, stream_);
  }

  int64_t select_union(const uint8_t* mask, int64_t n, int64_t ff, int32_t* ids, uint8_t* need,
                       uint64_t* selected) override {
    auto* counts = reinterpret_cast<int64_t*>(counts_.data);
    check(cudaMemsetAsync(counts, 0, 2 * sizeof(int64_t), stream_), "cudaMemset");
    launch_select_union(mask, n, ff, ids, need, counts, stream_);
    check(
        cudaMemcpyAsync(host_counts_, counts, 2 * sizeof(int64_t), cudaMemcpyDeviceToHost, stream_),
        "select_union");
    synchronize();
    *selected = static_cast<uint64_t>(host_counts_[1]);
    return host_counts_[0];
  }

  void select_columns(const float* full, std::span<const int32_t> ids, int64_t n, int64_t stride,
                      float* out) override {
    launch_select_columns(full, ids.data(), static_cast<int64_t>(ids.size()), n, stride, out,
                          stream_);
  }

  void sparsify(float* x, int64_t count, float threshold, uint64_t* kept,
                uint8_t* mask) override {
    launch_sparsify(x, count, threshold, false, FfnActivation::SwiGLU, kept, mask, stream_);
  }
  void sparsify_gate(FfnActivation act, float* gate, int64_t count, float threshold,
                     uint64_t* kept) override {
    launch_sparsify(gate, count, threshold, true, act, kept, nullptr, stream_);
  }

  void keep_needed(float* h, const uint8_t* need, int64_t n, int64_t stride, int64_t begin,
                   int64_t end, uint64_t* nonzero) override {
    launch_keep_needed(h, need, n, stride, begin, end, nonzero, stream_);
  }

  void add(float* x, const float* y, int64_t count) override { launch_add(x, y, count, stream_); }
  void scale(float* x, float factor, int64_t count) override {
    launch_scale(x, factor, count, stream_);
  }
  void mask_unchosen(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                     int64_t expert_ff, int64_t n_expert) override {
    launch_mask_unchosen(mask, weights, n, stride, expert_ff, n_expert, stream_);
  }
  void scale_by_expert(float* h, std::span<const int32_t> ids, const float* weights, int64_t n,
                       int64_t stride, int64_t expert_ff, int64_t n_expert) override {
    launch_scale_by_expert(h, ids.data(), static_cast<int64_t>(ids.size()), weights, n, stride,
                           expert_ff, n_expert, stream_);
  }
  void mix_experts(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim,
                   float* out) override {
    launch_mix_experts(y, weights, n, k, dim, out, stream_);
  }

  void copy(void* dst, const void* src, uint64_t bytes) override {
    if (bytes > 0)
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy");
  }

  void dequantize_row(DType type, const uint8_t* row, float* out, int64_t n) override {
    // One embedding row per token: made f32 on the host, uploaded (staged before returning).
    std::vector<float> values(static_cast<size_t>(n));
    strata::dequantize_row(type, row, values.data(), n);
    upload(out, values.data(), values.size() * sizeof(float));
  }

  Event record() override {
    const uint64_t ticket = ++next_ticket_;
    check(cudaEventRecord(events_[ticket % kEvents], stream_), "cudaEventRecord");
    return Event{0, ticket};
  }

  double elapsed(const Event& from, const Event& to) const override {
    cudaEvent_t a = events_[from.ticket % kEvents], b = events_[to.ticket % kEvents];
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return ms / 1e3;
  }

  void synchronize() override { check(cudaStreamSynchronize(stream_), "synchronize"); }

  double read_bandwidth() {
    const uint64_t left = budget_ > allocated() ? budget_ - allocated() : 0;
    const uint64_t bytes = std::min<uint64_t>(uint64_t{1} << 30, left / 2) / 4096 * 4096;
    if (bytes < (uint64_t{64} << 20)) fail("too little GPU memory left to measure its bandwidth");
    const int blocks = 4 * 132, threads = 512;  // enough to fill any current GPU
    const Buffer data = allocate(bytes, "the bandwidth probe");
    const Buffer out = allocate(static_cast<uint64_t>(blocks) * threads * 4, "the bandwidth probe");
    std::vector<double> runs;
    for (int i = 0; i < 6; ++i) {
      const Event a = record();
      launch_read(reinterpret_cast<const float*>(data.data), static_cast<int64_t>(bytes / 4),
                  reinterpret_cast<float*>(out.data), blocks, threads, stream_);
      const Event b = record();
      if (i > 0) runs.push_back(static_cast<double>(bytes) / elapsed(a, b));  // 0: warm-up
    }
    release(out);
    release(data);
    std::sort(runs.begin(), runs.end());
    return runs[runs.size() / 2];
  }

 private:
  void acquire(const CudaOptions& o) {
    check(cudaSetDevice(o.device), "cudaSetDevice");
    info_ = device_info(o.device);
    const uint64_t usable =
        info_.free_bytes > kContextReserve ? info_.free_bytes - kContextReserve : 0;
    if (o.budget > usable)
      fail("--vram-budget {} is more than the {} that {} has free", mib(o.budget), mib(usable),
           info_.name);
    budget_ = o.budget > 0 ? o.budget : usable;
    DeviceDriver driver{[](uint64_t bytes) -> uint8_t* {
                          void* p = nullptr;
                          if (cudaMalloc(&p, bytes) == cudaSuccess) return static_cast<uint8_t*>(p);
                          cudaGetLastError();  // refused: the pool says so
                          return nullptr;
                        },
                        [](uint8_t* p) { cudaFree(p); }};
    // A budget given is taken whole now; without one the pool grows as buffers need.
    pool_ = std::make_unique<DevicePool>(budget_, o.budget > 0, std::move(driver), kEmulated);
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublas().create(&blas_), "cublasCreate");
    check(cublas().set_stream(blas_, stream_), "cublasSetStream");
    axpy_scratch_ = allocate(kAxpyScratch, "the CUDA backend's axpy scratch");
    half_x_ = allocate(kHalfActivations, "the CUDA backend's f16 activations");
    half_w_ = allocate(kHalfWeights, "the CUDA backend's f16 weight rows");
    blas_workspace_ = allocate(kCublasWorkspace, "cuBLAS's workspace");
    counts_ = allocate(kCounts, "the CUDA backend's counters");
    scales_ = allocate(kScales, "the CUDA backend's f16 activation scales");
    check(cublas().set_workspace(blas_, blas_workspace_.data, blas_workspace_.bytes),
          "cublasSetWorkspace");
    check(cudaMallocHost(reinterpret_cast<void**>(&host_counts_), kCounts), "cudaMallocHost");
    for (Staging& st : staging_) {
      check(cudaMallocHost(reinterpret_cast<void**>(&st.bytes), kStagingBytes), "cudaMallocHost");
      check(cudaEventCreate(&st.copied), "cudaEventCreate");
    }
    events_.reserve(kEvents);
    for (size_t i = 0; i < kEvents; ++i) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreate(&e), "cudaEventCreate");
      events_.push_back(e);
    }
  }

  // Frees whatever acquire() made, in any state it left.
  void free_all() {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    cudaGetLastError();  // a fault of this backend's stream is not the next one's
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    events_.clear();
    for (Staging& st : staging_) {
      if (st.copied != nullptr) cudaEventDestroy(st.copied);
      if (st.bytes != nullptr) cudaFreeHost(st.bytes);
      st = Staging{};
    }
    if (host_counts_ != nullptr) cudaFreeHost(host_counts_);
    host_counts_ = nullptr;
    if (blas_ != nullptr) cublas().destroy(blas_);
    blas_ = nullptr;
    pool_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  static Places places(const TokenPlaces& at, int64_t t0, int64_t m) {
    Places p{};
    for (int64_t i = 0; i < m; ++i) {
      p.pos[i] = at.pos[t0 + i];
      p.base[i] = at.base[t0 + i];
    }
    return p;
  }

  bool fits_gemm(const Rows& w, const CudaPrepared& x) const {
    const uint64_t half_x = static_cast<uint64_t>(x.n * x.dim) * 2;
    const uint64_t half_row = static_cast<uint64_t>(w.cols) * 2;
    const bool plain = w.type == DType::F32 || w.type == DType::F16;
    const uint64_t elem = w.type == DType::F32 ? 4 : 2;
    return half_x <= half_x_.bytes && half_row <= half_w_.bytes && x.n <= kGemmMaxTokens &&
           w.cols % cuda_math::kUnit == 0 &&
           (!plain || w.row_bytes == static_cast<uint64_t>(w.cols) * elem);
  }

  // y = W x for a batch on the tensor cores (column-major view: Y^T = W^T' X^T). The f16
  // activations are each token's divided by a power of two that keeps them finite (an
  // activation above 65504 would be inf), the products multiplied back.
  void gemm(const Rows& w, const CudaPrepared& x, float* y, int64_t y_stride, bool& halved) {
    const float one = 1.0f, zero = 0.0f;
    const int n = static_cast<int>(x.n), k = static_cast<int>(w.cols);
    if (w.type == DType::F32) {
      check(cublas().sgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), n, k, &one,
                           reinterpret_cast<const float*>(w.data), k, x.x, k, &zero, y,
                           static_cast<int>(y_stride)),
            "sgemm");
      return;
    }
    auto* xh = reinterpret_cast<uint16_t*>(half_x_.data);
    auto* scales = reinterpret_cast<float*>(scales_.data);
    if (!halved) {
      launch_rows_to_scaled_half(x.x, x.n, x.dim, xh, scales, stream_);
      halved = true;
    }
    auto product = [&](const void* a, int64_t r0, int64_t rows) {
      check(cublas().gemm_ex(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), n, k, &one, a,
                             CUDA_R_16F, k, xh, CUDA_R_16F, k, &zero, y + r0, CUDA_R_32F,
                             static_cast<int>(y_stride), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "gemm");
    };
    if (w.type == DType::F16) {
      product(w.data, 0, w.rows);
    } else {
      const int64_t chunk = static_cast<int64_t>(half_w_.bytes / (static_cast<uint64_t>(k) * 2));
      auto* wh = reinterpret_cast<uint16_t*>(half_w_.data);
      for (int64_t r0 = 0; r0 < w.rows; r0 += chunk) {
        const int64_t rows = std::min(chunk, w.rows - r0);
        launch_rows_to_half(w, r0, rows, wh, stream_);
        product(wh, r0, rows);
      }
    }
    launch_scale_rows(y, x.n, w.rows, y_stride, scales, stream_);
  }

  CudaDeviceInfo info_;
  uint64_t budget_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  mutable std::mutex mutex_;
  std::unique_ptr<DevicePool> pool_;
  Buffer axpy_scratch_, half_x_, half_w_, blas_workspace_, counts_, scales_;
  int64_t* host_counts_ = nullptr;
  std::vector<cudaEvent_t> events_;
  uint64_t next_ticket_ = 0;
  // Pinned buffers uploads go through, in turn; `copied` is recorded after each one's copy.
  struct Staging {
    uint8_t* bytes = nullptr;
    cudaEvent_t copied = nullptr;
  };
  std::array<Staging, 2> staging_{};
  uint64_t next_staging_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_backend(const CudaOptions& options) {
  if (device_count() <= options.device) fail("{}", unavailable_reason());
  return std::make_unique<CudaBackend>(options);
}

double read_bandwidth(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr) fail("the read bandwidth of '{}' is not a CUDA measurement", backend.name());
  return cuda->read_bandwidth();
}

}  // namespace strata::STRATA_CUDA_NS

namespace strata {

#if defined(STRATA_CUDA_EMU)

std::unique_ptr<Backend> make_cuda_emu_backend(const CudaOptions& options) {
  return cuda_emu::make_backend(options);
}

CudaDeviceInfo cuda_emu_device_info() {
  return cuda_emu::device_info(0);
}

// One definition for both builds (the emulated one is always built).
uint64_t cuda_backend_overhead_bytes() {
  return cuda_emu::kAxpyScratch + cuda_emu::kHalfActivations + cuda_emu::kHalfWeights +
         cuda_emu::kCublasWorkspace + cuda_emu::kCounts + cuda_emu::kScales + cuda_emu::kPoolSlack;
}

#else

int cuda_device_count() {
  return cuda::device_count();
}

std::string cuda_unavailable_reason() {
  return cuda::unavailable_reason();
}

CudaDeviceInfo cuda_device_info(int device) {
  return cuda::device_info(device);
}

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
  return cuda::make_backend(options);
}

double cuda_read_bandwidth(Backend& backend) {
  return cuda::read_bandwidth(backend);
}

#endif

}  // namespace strata
