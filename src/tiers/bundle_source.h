// Where neuron bundles are read from: the model file, opened for direct I/O (O_DIRECT, so the
// page cache neither hides the disk's speed nor takes memory outside the budget), read with
// pread. Any failure -- an I/O error, a short read, a file truncated after loading -- is an
// Error naming the file and offset; no partial data is ever used. Tests substitute a
// fault-injecting source.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/thread_pool.h"

namespace strata {

struct ReadRequest {
  void* dst;
  uint64_t bytes;
  uint64_t offset;
  // Scattered (pieces > 0): the bytes land in `pieces` equal parts at piece_dst[0 .. pieces)
  // instead of at dst: adjacent bundles on flash read in one request into cache slots that
  // are not adjacent. At most kMaxPieces.
  uint32_t pieces = 0;
  void* const* piece_dst = nullptr;
  static constexpr uint32_t kMaxPieces = 256;
};

class BundleSource {
 public:
  virtual ~BundleSource() = default;
  // Reads exactly `bytes` at `offset` into dst (dst, bytes and offset 4 KiB-aligned).
  virtual void read(void* dst, uint64_t bytes, uint64_t offset) = 0;
  // Every request, in any order. The default spreads `read` calls over the pool's threads
  // (each blocks in its read: the pool size is the number of reads in flight); a scattered
  // request is read piece by piece.
  virtual void read_batch(std::span<const ReadRequest> requests, ThreadPool& pool);
  virtual std::string describe() const = 0;
  // Reads in flight in read_batch; 0: as many as the pool has threads.
  virtual int queue_depth() const { return 0; }

  // Reads that go on while the caller computes (look-ahead): submit() puts them in flight and
  // returns a ticket; wait(ticket) returns once they have all landed (rethrowing a failure,
  // as read_batch would) with the time the last one was seen to land; poll() notes what has
  // landed without blocking. Issued and collected on the caller's thread (no thread needs the
  // CPU to start them). The default reads in submit() (asynchronous() is false).
  using Clock = std::chrono::steady_clock;
  virtual bool asynchronous() const { return false; }
  virtual uint64_t submit(std::span<const ReadRequest> requests, ThreadPool& pool) {
    read_batch(requests, pool);
    return 0;
  }
  virtual Clock::time_point wait(uint64_t ticket) { return Clock::now(); }
  virtual void poll() {}
};

// The model file through io_uring (many reads in flight from one thread) where the kernel and
// build allow it, otherwise FileBundleSource with a notice on stderr saying why.
std::unique_ptr<BundleSource> open_bundle_source(const std::string& path);

class FileBundleSource final : public BundleSource {
 public:
  // Falls back to buffered reads (with a notice on stderr) where O_DIRECT is refused, e.g. on
  // tmpfs.
  explicit FileBundleSource(const std::string& path);
  ~FileBundleSource() override;
  void read(void* dst, uint64_t bytes, uint64_t offset) override;
  std::string describe() const override;
  bool direct() const { return direct_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
};

}  // namespace strata
