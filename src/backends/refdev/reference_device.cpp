#include "backends/refdev/reference_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace strata {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string mib(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / 1048576.0);
}

// A batch's products with their weights copied: the caller's MatrixViews may live on its stack
// (a store's segment) and change before the queued work runs.
struct OwnedJobs {
  std::vector<MatrixView> views;
  std::vector<RowsJob> jobs;
  explicit OwnedJobs(std::span<const RowsJob> in) : views(in.size()), jobs(in.begin(), in.end()) {
    for (size_t i = 0; i < in.size(); ++i) {
      views[i] = *in[i].w;
      jobs[i].w = &views[i];
    }
  }
  OwnedJobs(const OwnedJobs& o) : OwnedJobs(std::span<const RowsJob>(o.jobs)) {}
};

}  // namespace

ReferenceDevice::ReferenceDevice(ReferenceDeviceOptions options)
    : options_(options), pool_(options.threads), cpu_(pool_), worker_([this] { worker_loop(); }) {}

bool ReferenceDevice::reads_weights(DType type) const {
  const auto& no = options_.declined_types;
  return cpu_.reads_weights(type) && std::find(no.begin(), no.end(), type) == no.end();
}

bool ReferenceDevice::supports(LayerOp op) const {
  const auto& no = options_.declined_ops;
  return std::find(no.begin(), no.end(), op) == no.end();
}

ReferenceDevice::~ReferenceDevice() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

std::string ReferenceDevice::name() const {
  return fmt::format("reference device ({}, budget {})", cpu_.name(),
                     options_.budget > 0 ? mib(options_.budget) : "none");
}

void ReferenceDevice::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const bool failed = error_ != nullptr;
    lock.unlock();
    std::exception_ptr error;
    if (!failed) {  // after a failure the rest of the queue is dropped, as a faulted stream
      try {
        work();
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    if (error != nullptr && error_ == nullptr) error_ = error;
    busy_ = false;
    changed_.notify_all();
  }
}

void ReferenceDevice::enqueue(std::function<void()> work) {
  {
    const std::lock_guard lock(mutex_);
    queue_.push_back(std::move(work));
  }
  changed_.notify_all();
}

void ReferenceDevice::synchronize() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
  if (error_ != nullptr) {
    const std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

Buffer ReferenceDevice::allocate(uint64_t bytes, std::string_view what) {
  {
    const std::lock_guard lock(mutex_);
    if (options_.budget > 0 && allocated_ + bytes > options_.budget)
      fail("{} needs {}, more than the {} left of the device's {} budget", what, mib(bytes),
           mib(options_.budget - allocated_), mib(options_.budget));
  }
  Buffer b = cpu_.allocate(bytes, what);
  b.device = Device::Accelerator;
  const std::lock_guard lock(mutex_);
  allocated_ += bytes;
  peak_ = std::max(peak_, allocated_);
  blocks_.emplace(b.data, bytes);
  return b;
}

void ReferenceDevice::release(const Buffer& buffer) {
  if (buffer.data == nullptr) return;
  synchronize();  // queued work may still use it
  {
    const std::lock_guard lock(mutex_);
    const auto it = blocks_.find(buffer.data);
    if (it == blocks_.end()) return;
    allocated_ -= it->second;
    blocks_.erase(it);
  }
  cpu_.release(buffer);
}

uint64_t ReferenceDevice::allocated() const {
  const std::lock_guard lock(mutex_);
  return allocated_;
}

uint64_t ReferenceDevice::peak_allocated() const {
  const std::lock_guard lock(mutex_);
  return peak_;
}

void ReferenceDevice::check(const void* p, uint64_t bytes, const char* op) const {
  const auto* at = static_cast<const uint8_t*>(p);
  const std::lock_guard lock(mutex_);
  auto it = blocks_.upper_bound(at);
  if (it != blocks_.begin()) {
    --it;
    if (at >= it->first && at + bytes <= it->first + it->second) return;
  }
  fail("{}: {} bytes at {} are not the device's memory (host memory passed to a device op)", op,
       bytes, p);
}

void ReferenceDevice::check(const MatrixView& w, const char* op) const {
  if (w.device != Device::Accelerator) fail("{}: a weight in {} memory", op, device_name(w.device));
  check(w.data, w.bytes(), op);
}

void ReferenceDevice::upload(void* dst, const void* host, uint64_t bytes) {
  if (bytes == 0) return;
  check(dst, bytes, "upload");
  const auto* h = static_cast<const uint8_t*>(host);
  auto staged = std::make_shared<std::vector<uint8_t>>(h, h + bytes);  // pageable: staged now
  enqueue([dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
}

void ReferenceDevice::download(void* host, const void* src, uint64_t bytes) {
  if (bytes == 0) return;
  check(src, bytes, "download");
  synchronize();
  std::memcpy(host, src, bytes);
}

std::unique_ptr<PreparedRows> ReferenceDevice::make_prepared(int64_t max_rows) {
  return cpu_.make_prepared(max_rows);
}

void ReferenceDevice::prepare(PreparedRows& p, const float* x, int64_t dim, int64_t n,
                              std::span<const DType> readers) {
  check(x, static_cast<uint64_t>(n * dim) * 4, "prepare");
  enqueue([this, &p, x, dim, n, r = std::vector<DType>(readers.begin(), readers.end())] {
    cpu_.prepare(p, x, dim, n, r);
  });
}

void ReferenceDevice::rms_norm(const float* x, const float* weight, float* out, int64_t n,
                               int64_t dim, float eps) {
  const uint64_t bytes = static_cast<uint64_t>(n * dim) * 4;
  check(x, bytes, "rms_norm");
  check(weight, static_cast<uint64_t>(dim) * 4, "rms_norm");
  check(out, bytes, "rms_norm");
  enqueue([=, this] { cpu_.rms_norm(x, weight, out, n, dim, eps); });
}

void ReferenceDevice::layer_norm(const float* x, const float* weight, const float* bias, float* out,
                                 int64_t n, int64_t dim, float eps) {
  const uint64_t bytes = static_cast<uint64_t>(n * dim) * 4;
  check(x, bytes, "layer_norm");
  check(weight, static_cast<uint64_t>(dim) * 4, "layer_norm");
  if (bias != nullptr) check(bias, static_cast<uint64_t>(dim) * 4, "layer_norm");
  check(out, bytes, "layer_norm");
  enqueue([=, this] { cpu_.layer_norm(x, weight, bias, out, n, dim, eps); });
}

void ReferenceDevice::add_bias(float* x, const float* bias, int64_t n, int64_t dim) {
  if (n * dim == 0) return;
  check(x, static_cast<uint64_t>(n * dim) * 4, "add_bias");
  check(bias, static_cast<uint64_t>(dim) * 4, "add_bias");
  enqueue([=, this] { cpu_.add_bias(x, bias, n, dim); });
}

void ReferenceDevice::add_bias_of(float* y, const float* bias, std::span<const int32_t> ids,
                                  int64_t n, int64_t stride) {
  if (ids.empty() || n == 0) return;
  check(y, static_cast<uint64_t>((n - 1) * stride + static_cast<int64_t>(ids.size())) * 4,
        "add_bias_of");
  check(bias, 4, "add_bias_of");
  check(ids.data(), ids.size_bytes(), "add_bias_of");
  enqueue([=, this] { cpu_.add_bias_of(y, bias, ids, n, stride); });
}

void ReferenceDevice::matmul(std::span<const RowsJob> jobs, const PreparedRows& x) {
  for (const RowsJob& j : jobs) {
    check(*j.w, "matmul");
    check(j.y, 4, "matmul");
  }
  enqueue([this, owned = OwnedJobs(jobs), &x] { cpu_.matmul(owned.jobs, x); });
}

void ReferenceDevice::gather(std::span<const RowsJob> jobs, std::span<const int32_t> rows,
                             const PreparedRows& x, const uint8_t* need, int64_t need_stride) {
  for (const RowsJob& j : jobs) {
    check(*j.w, "gather");
    check(j.y, 4, "gather");
  }
  if (!rows.empty()) check(rows.data(), rows.size_bytes(), "gather");
  if (need != nullptr) check(need, 1, "gather");
  enqueue([this, owned = OwnedJobs(jobs), rows, &x, need, need_stride] {
    cpu_.gather(owned.jobs, rows, x, need, need_stride);
  });
}

void ReferenceDevice::axpy(const MatrixView& wt, std::span<const int32_t> rows, const float* c,
                           int64_t c_stride, int64_t n, float* out, int64_t out_stride,
                           std::span<const int32_t> neurons, int64_t id_bound) {
  check(wt, "axpy");
  if (!rows.empty()) {
    check(rows.data(), rows.size_bytes(), "axpy");
    check(c, 4, "axpy");
  }
  if (!neurons.empty()) check(neurons.data(), neurons.size_bytes(), "axpy");
  check(out, static_cast<uint64_t>(((n - 1) * out_stride + wt.cols) * 4), "axpy");
  enqueue([=, this] { cpu_.axpy(wt, rows, c, c_stride, n, out, out_stride, neurons, id_bound); });
}

void ReferenceDevice::rope_and_store(float* q, float* k, const float* v, int64_t n,
                                     const HeadShape& s, const RopeTable& rope, const KvLayer& kv,
                                     const TokenPlaces& at) {
  check(q, static_cast<uint64_t>(n * s.q_dim()) * 4, "rope_and_store");
  check(k, static_cast<uint64_t>(n * s.kv_dim()) * 4, "rope_and_store");
  check(v, static_cast<uint64_t>(n * s.kv_dim()) * 4, "rope_and_store");
  check(rope.cos, static_cast<uint64_t>(n * rope.half) * 4, "rope_and_store");
  check(rope.sin, static_cast<uint64_t>(n * rope.half) * 4, "rope_and_store");
  check(kv.k, 1, "rope_and_store");
  check(kv.v, 1, "rope_and_store");
  // The places are host arrays, read now (as a GPU backend uploads them with the launch).
  std::vector<int64_t> pos(at.pos, at.pos + n), base(at.base, at.base + n);
  enqueue([=, this, pos = std::move(pos), base = std::move(base)] {
    cpu_.rope_and_store(q, k, v, n, s, rope, kv, TokenPlaces{pos.data(), base.data()});
  });
}

void ReferenceDevice::attention(const float* q, int64_t n, const HeadShape& s,
                                const ScoreRule& rule, const KvLayer& kv, const TokenPlaces& at,
                                int64_t n_ctx, float* scores, float* out) {
  check(q, static_cast<uint64_t>(n * s.q_dim()) * 4, "attention");
  check(kv.k, 1, "attention");
  check(kv.v, 1, "attention");
  check(scores, static_cast<uint64_t>(n * s.n_head * n_ctx) * 4, "attention");
  check(out, static_cast<uint64_t>(n * s.q_dim()) * 4, "attention");
  if (rule.sinks != nullptr) check(rule.sinks, static_cast<uint64_t>(s.n_head) * 4, "attention");
  std::vector<int64_t> pos(at.pos, at.pos + n), base(at.base, at.base + n);
  enqueue([=, this, pos = std::move(pos), base = std::move(base)] {
    cpu_.attention(q, n, s, rule, kv, TokenPlaces{pos.data(), base.data()}, n_ctx, scores, out);
  });
}

void ReferenceDevice::activation(FfnActivation act, const float* gate, const float* up, float* h,
                                 int64_t count) {
  if (count == 0) return;
  if (ffn_has_gate(act)) check(gate, static_cast<uint64_t>(count) * 4, "activation");
  check(up, static_cast<uint64_t>(count) * 4, "activation");
  check(h, static_cast<uint64_t>(count) * 4, "activation");
  enqueue([=, this] { cpu_.activation(act, gate, up, h, count); });
}

void ReferenceDevice::relu(float* x, int64_t count) {
  check(x, static_cast<uint64_t>(count) * 4, "relu");
  enqueue([=, this] { cpu_.relu(x, count); });
}

void ReferenceDevice::threshold(const float* scores, float threshold, bool strict, uint8_t* mask,
                                int64_t count) {
  check(scores, static_cast<uint64_t>(count) * 4, "threshold");
  check(mask, static_cast<uint64_t>(count), "threshold");
  enqueue([=, this] { cpu_.threshold(scores, threshold, strict, mask, count); });
}

int64_t ReferenceDevice::select_union(const uint8_t* mask, int64_t n, int64_t ff, int32_t* ids,
                                      uint8_t* need, uint64_t* selected) {
  check(mask, static_cast<uint64_t>(n * ff), "select_union");
  check(ids, static_cast<uint64_t>(ff) * 4, "select_union");
  check(need, static_cast<uint64_t>(n * ff), "select_union");
  synchronize();  // the count is returned: the work before it must be done
  return cpu_.select_union(mask, n, ff, ids, need, selected);
}

void ReferenceDevice::select_columns(const float* full, std::span<const int32_t> ids, int64_t n,
                                     int64_t stride, float* out) {
  check(full, static_cast<uint64_t>(n * stride) * 4, "select_columns");
  if (!ids.empty()) check(ids.data(), ids.size_bytes(), "select_columns");
  check(out, 4, "select_columns");
  enqueue([=, this] { cpu_.select_columns(full, ids, n, stride, out); });
}

void ReferenceDevice::sparsify(float* x, int64_t count, float threshold, uint64_t* kept,
                               uint8_t* mask) {
  check(x, static_cast<uint64_t>(count) * 4, "sparsify");
  check(kept, sizeof(uint64_t), "sparsify");
  if (mask != nullptr) check(mask, static_cast<uint64_t>(count), "sparsify");
  enqueue([=, this] { cpu_.sparsify(x, count, threshold, kept, mask); });
}

void ReferenceDevice::sparsify_gate(FfnActivation act, float* gate, int64_t count,
                                    float threshold, uint64_t* kept) {
  check(gate, static_cast<uint64_t>(count) * 4, "sparsify_gate");
  check(kept, sizeof(uint64_t), "sparsify_gate");
  enqueue([=, this] { cpu_.sparsify_gate(act, gate, count, threshold, kept); });
}

void ReferenceDevice::keep_needed(float* h, const uint8_t* need, int64_t n, int64_t stride,
                                  int64_t begin, int64_t end, uint64_t* nonzero) {
  check(h, static_cast<uint64_t>(n * stride) * 4, "keep_needed");
  if (need != nullptr) check(need, static_cast<uint64_t>(n * stride), "keep_needed");
  check(nonzero, sizeof(uint64_t), "keep_needed");
  enqueue([=, this] { cpu_.keep_needed(h, need, n, stride, begin, end, nonzero); });
}

void ReferenceDevice::add(float* x, const float* y, int64_t count) {
  check(x, static_cast<uint64_t>(count) * 4, "add");
  check(y, static_cast<uint64_t>(count) * 4, "add");
  enqueue([=, this] { cpu_.add(x, y, count); });
}

void ReferenceDevice::scale(float* x, float factor, int64_t count) {
  check(x, static_cast<uint64_t>(count) * 4, "scale");
  enqueue([=, this] { cpu_.scale(x, factor, count); });
}

void ReferenceDevice::mask_unchosen(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                                    int64_t expert_ff, int64_t n_expert) {
  if (n * stride == 0) return;
  check(mask, static_cast<uint64_t>(n * stride), "mask_unchosen");
  check(weights, static_cast<uint64_t>(n * n_expert) * 4, "mask_unchosen");
  enqueue([=, this] { cpu_.mask_unchosen(mask, weights, n, stride, expert_ff, n_expert); });
}

void ReferenceDevice::scale_by_expert(float* h, std::span<const int32_t> ids, const float* weights,
                                      int64_t n, int64_t stride, int64_t expert_ff,
                                      int64_t n_expert) {
  if (ids.empty() || n == 0) return;
  check(h, static_cast<uint64_t>((n - 1) * stride + static_cast<int64_t>(ids.size())) * 4,
        "scale_by_expert");
  check(weights, static_cast<uint64_t>(n * n_expert) * 4, "scale_by_expert");
  check(ids.data(), ids.size_bytes(), "scale_by_expert");
  enqueue([=, this] { cpu_.scale_by_expert(h, ids, weights, n, stride, expert_ff, n_expert); });
}

void ReferenceDevice::mix_experts(const float* y, const float* weights, int64_t n, int64_t k,
                                  int64_t dim, float* out) {
  check(y, static_cast<uint64_t>(n * k * dim) * 4, "mix_experts");
  check(weights, static_cast<uint64_t>(n * k) * 4, "mix_experts");
  check(out, static_cast<uint64_t>(n * dim) * 4, "mix_experts");
  enqueue([=, this] { cpu_.mix_experts(y, weights, n, k, dim, out); });
}

void ReferenceDevice::copy(void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return;
  check(dst, bytes, "copy");
  check(src, bytes, "copy");
  enqueue([=] { std::memcpy(dst, src, bytes); });
}

void ReferenceDevice::dequantize_row(DType type, const uint8_t* row, float* out, int64_t n) {
  check(out, static_cast<uint64_t>(n) * 4, "dequantize_row");
  // The row is host memory, read now.
  std::vector<uint8_t> staged(row, row + row_bytes(type, static_cast<uint64_t>(n)));
  enqueue(
      [=, this, staged = std::move(staged)] { cpu_.dequantize_row(type, staged.data(), out, n); });
}

Event ReferenceDevice::record() {
  uint64_t ticket = 0;
  {
    const std::lock_guard lock(mutex_);
    ticket = ++next_ticket_;
  }
  enqueue([this, ticket] {
    const std::lock_guard lock(mutex_);
    times_[ticket % kTimes] = now_seconds();
    done_ticket_ = ticket;
  });
  return Event{0, ticket};
}

double ReferenceDevice::elapsed(const Event& from, const Event& to) const {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return done_ticket_ >= to.ticket || error_ != nullptr; });
  return times_[to.ticket % kTimes] - times_[from.ticket % kTimes];
}

}  // namespace strata
