// The reference device: a CPU implementation of the backend interface that behaves like a GPU
// where it matters to the code above it, so device code paths run in CI on any machine:
//   - its memory is its own: allocations count against its budget (an emulated --vram-budget)
//     and every op checks that each pointer it is given lies in one of them (or, for the host
//     arguments the interface names, is read before the op returns), so host memory leaking
//     into a device op fails with a message naming the op instead of working by accident;
//   - its ops run on its own worker thread, queued like a GPU stream: a caller that reads
//     results before synchronize() or download() sees a race (TSan) or stale values;
//   - it computes with the CPU backend's kernels and layouts, so a session on it gives the
//     CPU-only session's logits bit for bit (what the device tests hold it to).
// It poses as the GPU (Device::Accelerator) in plans. Selected only by tests and the hidden
// `--device reference` flag.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "core/thread_pool.h"

namespace strata {

struct ReferenceDeviceOptions {
  uint64_t budget = 0;  // bytes it may hold; 0: no limit
  int threads = 1;      // the CPU threads its worker computes with
  // Weight types it declines as a device without their kernels would (tests of that path);
  // empty: it reads every type the CPU does.
  std::vector<DType> declined_types{};
  std::vector<LayerOp> declined_ops{};  // as a device whose kernels lack them (tests)
};

class ReferenceDevice final : public Backend {
 public:
  explicit ReferenceDevice(ReferenceDeviceOptions options = {});
  ~ReferenceDevice() override;

  Device device() const override { return Device::Accelerator; }
  std::string name() const override;
  using Backend::allocate;
  Buffer allocate(uint64_t bytes, std::string_view what) override;
  void release(const Buffer& buffer) override;
  uint64_t allocated() const override;
  // The most it ever held at once (what a budget must bound, checked after the session ends).
  uint64_t peak_allocated() const;
  uint64_t budget() const { return options_.budget; }
  void upload(void* dst, const void* host, uint64_t bytes) override;
  void download(void* host, const void* src, uint64_t bytes) override;
  bool reads_weights(DType type) const override;
  bool supports(LayerOp op) const override;
  Layout preferred_layout(const MatrixView& w, WeightUse use) const override {
    return cpu_.preferred_layout(w, use);
  }

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
  void dequantize_row(DType type, const uint8_t* row, float* out, int64_t n) override;

  Event record() override;
  double elapsed(const Event& from, const Event& to) const override;
  void synchronize() override;

 private:
  // Fails unless [p, p + bytes) lies in one of this device's allocations.
  void check(const void* p, uint64_t bytes, const char* op) const;
  void check(const MatrixView& w, const char* op) const;
  void enqueue(std::function<void()> work);
  void worker_loop();

  ReferenceDeviceOptions options_;
  ThreadPool pool_;
  CpuBackend cpu_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;  // the first failure of a queued op, thrown by synchronize()
  std::map<const uint8_t*, uint64_t> blocks_;  // allocation start -> bytes
  uint64_t allocated_ = 0, peak_ = 0;
  static constexpr uint64_t kTimes = 1 << 16;  // recorded points kept (a ring)
  std::vector<double> times_ = std::vector<double>(kTimes);
  uint64_t next_ticket_ = 0, done_ticket_ = 0;
  std::thread worker_;
};

}  // namespace strata
