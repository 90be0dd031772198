// Where neuron bundles are read from: the model file, opened for direct I/O (O_DIRECT, so the
// page cache neither hides the disk's speed nor takes memory outside the budget), read with
// pread. Any failure -- an I/O error, a short read, a file truncated after loading -- is an
// Error naming the file and offset; no partial data is ever used. Tests substitute a
// fault-injecting source.
#pragma once

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
};

class BundleSource {
 public:
  virtual ~BundleSource() = default;
  // Reads exactly `bytes` at `offset` into dst (dst, bytes and offset 4 KiB-aligned).
  virtual void read(void* dst, uint64_t bytes, uint64_t offset) = 0;
  // Every request, in any order. The default spreads `read` calls over the pool's threads
  // (each blocks in its read: the pool size is the number of reads in flight).
  virtual void read_batch(std::span<const ReadRequest> requests, ThreadPool& pool);
  virtual std::string describe() const = 0;
  // Reads in flight in read_batch; 0: as many as the pool has threads.
  virtual int queue_depth() const { return 0; }
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
