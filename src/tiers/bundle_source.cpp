#include "tiers/bundle_source.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"

#if STRATA_HAVE_LIBURING
#include <liburing.h>
#endif

namespace strata {

FileBundleSource::FileBundleSource(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  direct_ = fd_ >= 0;
  if (fd_ < 0) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open '{}' for neuron reads: {}", path, std::strerror(errno));
    fmt::print(stderr,
               "note: '{}' does not allow direct I/O; neuron reads go through the page cache\n",
               path);
  }
}

FileBundleSource::~FileBundleSource() {
  if (fd_ >= 0) ::close(fd_);
}

void FileBundleSource::read(void* dst, uint64_t bytes, uint64_t offset) {
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t r = ::pread(fd_, static_cast<char*>(dst) + done, bytes - done,
                              static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("reading neurons from '{}' at offset {} failed: {}", path_, offset + done,
           std::strerror(errno));
    }
    if (r == 0)
      fail("'{}' ended at offset {} while reading neurons (was it truncated after loading?)", path_,
           offset + done);
    done += static_cast<uint64_t>(r);
  }
}

void BundleSource::read_batch(std::span<const ReadRequest> requests, ThreadPool& pool) {
  std::exception_ptr error;
  std::mutex error_mutex;
  pool.parallel_for(static_cast<int64_t>(requests.size()), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const ReadRequest& q = requests[static_cast<size_t>(r)];
      try {
        if (q.pieces == 0) {
          read(q.dst, q.bytes, q.offset);
        } else {
          const uint64_t piece = q.bytes / q.pieces;
          for (uint32_t k = 0; k < q.pieces; ++k) read(q.piece_dst[k], piece, q.offset + k * piece);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  });
  if (error) std::rethrow_exception(error);
}

std::string FileBundleSource::describe() const {
  return fmt::format("{} ({})", path_, direct_ ? "direct I/O" : "buffered");
}

#if STRATA_HAVE_LIBURING
namespace {

// Reads through one ring from the caller's thread: submit() queues every request (as many in
// flight as the completion queue holds), wait() and poll() collect completions. A completion
// that is short is resubmitted for the rest; one that failed, or a read past the end, is an
// error like FileBundleSource's, raised by wait() for its ticket.
class UringBundleSource final : public BundleSource {
 public:
  static constexpr unsigned kDepth = 64;       // what read planning assumes in flight
  static constexpr unsigned kRing = 256;       // submission entries
  static constexpr unsigned kInFlight = 4096;  // completion entries: reads in flight at most

  // Null (and `why` set) when the kernel refuses a ring or direct I/O.
  static std::unique_ptr<UringBundleSource> create(const std::string& path, std::string& why) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
      why = fmt::format("no direct I/O: {}", std::strerror(errno));
      return nullptr;
    }
    std::unique_ptr<UringBundleSource> s(new UringBundleSource(path, fd));
    io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = kInFlight;
    const int rc = io_uring_queue_init_params(kRing, &s->ring_, &params);
    if (rc != 0) {
      why = std::strerror(-rc);
      return nullptr;
    }
    s->ring_ready_ = true;
    return s;
  }
  ~UringBundleSource() override {
    if (ring_ready_) {
      try {  // nothing may land in memory that is about to be freed
        while (in_flight_ > 0) reap(true);
      } catch (const std::exception&) {
      }
      io_uring_queue_exit(&ring_);
    }
    ::close(fd_);
  }

  void read(void* dst, uint64_t bytes, uint64_t offset) override { file_.read(dst, bytes, offset); }

  void read_batch(std::span<const ReadRequest> requests, ThreadPool& pool) override {
    wait(submit(requests, pool));
  }

  bool asynchronous() const override { return true; }

  uint64_t submit(std::span<const ReadRequest> requests, ThreadPool&) override {
    const uint64_t ticket = ++last_ticket_;
    Batch& batch = batches_[ticket];
    for (const ReadRequest& q : requests) {
      size_t id;
      if (!free_reads_.empty()) {
        id = free_reads_.back();
        free_reads_.pop_back();
      } else {
        id = reads_.size();
        reads_.emplace_back();
      }
      Read& r = reads_[id];
      r.ticket = ticket;
      r.left = q.bytes;
      r.offset = q.offset;
      r.iov.clear();
      if (q.pieces == 0) {
        r.iov.push_back({q.dst, q.bytes});
      } else {
        for (uint32_t k = 0; k < q.pieces; ++k)
          r.iov.push_back({q.piece_dst[k], static_cast<size_t>(q.bytes / q.pieces)});
      }
      r.first = 0;
      queued_.push_back(id);
      ++batch.outstanding;
    }
    if (batch.outstanding == 0) batch.done = Clock::now();
    pump();
    return ticket;
  }

  Clock::time_point wait(uint64_t ticket) override {
    const auto it = batches_.find(ticket);
    if (it == batches_.end()) return Clock::now();
    while (it->second.outstanding > 0) {
      if (in_flight_ == 0) fail("reads of '{}' were lost before they landed", file_.describe());
      reap(true);
    }
    const Batch batch = std::move(it->second);
    batches_.erase(it);
    if (!batch.failure.empty()) fail("{}", batch.failure);
    return batch.done;
  }

  void poll() override {
    if (in_flight_ > 0) reap(false);
  }

 private:
  struct Read {
    uint64_t ticket = 0;
    uint64_t left = 0, offset = 0;
    std::vector<iovec> iov;
    size_t first = 0;  // the first piece still to read
  };
  struct Batch {
    uint64_t outstanding = 0;
    std::string failure;
    Clock::time_point done;
  };

  // Queued reads into the ring while the completion queue has room, submitted in one call.
  void pump() {
    bool added = false;
    while (!queued_.empty() && in_flight_ < kInFlight) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) {  // the submission ring is full: hand it to the kernel
        io_uring_submit(&ring_);
        continue;
      }
      const size_t id = queued_.front();
      queued_.pop_front();
      Read& r = reads_[id];
      const size_t pieces = r.iov.size() - r.first;
      if (pieces == 1)
        io_uring_prep_read(sqe, fd_, r.iov[r.first].iov_base, static_cast<unsigned>(r.left),
                           r.offset);
      else
        io_uring_prep_readv(sqe, fd_, r.iov.data() + r.first, static_cast<unsigned>(pieces),
                            r.offset);
      io_uring_sqe_set_data64(sqe, id);
      ++in_flight_;
      added = true;
    }
    if (added) io_uring_submit(&ring_);
  }

  // Takes every completion there is (blocking for one first when `block`).
  void reap(bool block) {
    io_uring_cqe* cqe = nullptr;
    if (block) {
      const int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc == -EINTR) return;  // a signal: the caller waits again
      if (rc < 0) fail("io_uring wait on '{}' failed: {}", file_.describe(), std::strerror(-rc));
    }
    const Clock::time_point now = Clock::now();
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      const size_t id = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --in_flight_;
      complete(id, res, now);
    }
    pump();
  }

  void complete(size_t id, int res, Clock::time_point now) {
    Read& r = reads_[id];
    Batch& batch = batches_[r.ticket];
    if (res < 0) {
      if (batch.failure.empty())
        batch.failure = fmt::format("reading neurons from '{}' at offset {} failed: {}",
                                    file_.describe(), r.offset, std::strerror(-res));
    } else if (res == 0) {
      if (batch.failure.empty())
        batch.failure = fmt::format(
            "'{}' ended at offset {} while reading neurons (was it truncated after loading?)",
            file_.describe(), r.offset);
    } else if (static_cast<uint64_t>(res) < r.left) {
      r.left -= static_cast<uint64_t>(res), r.offset += static_cast<uint64_t>(res);
      for (uint64_t done = static_cast<uint64_t>(res); done > 0;) {  // past what arrived
        iovec& v = r.iov[r.first];
        const uint64_t step = std::min<uint64_t>(done, v.iov_len);
        v.iov_base = static_cast<char*>(v.iov_base) + step;
        v.iov_len -= step;
        done -= step;
        if (v.iov_len == 0) ++r.first;
      }
      if (batch.failure.empty()) {
        queued_.push_front(id);  // the rest, first in line
        return;
      }
    }
    free_reads_.push_back(id);
    if (--batch.outstanding == 0) batch.done = now;
  }

  std::string describe() const override { return file_.describe() + " via io_uring"; }
  int queue_depth() const override { return static_cast<int>(kDepth); }

 private:
  UringBundleSource(const std::string& path, int fd) : file_(path), fd_(fd) {}

  FileBundleSource file_;
  int fd_;
  io_uring ring_{};
  bool ring_ready_ = false;
  std::vector<Read> reads_;  // by id (the completion's user data)
  std::vector<size_t> free_reads_;
  std::deque<size_t> queued_;  // ids not yet in the ring
  size_t in_flight_ = 0;
  std::unordered_map<uint64_t, Batch> batches_;  // by ticket, until waited for
  uint64_t last_ticket_ = 0;
};

}  // namespace
#endif

std::unique_ptr<BundleSource> open_bundle_source(const std::string& path) {
#if STRATA_HAVE_LIBURING
  std::string why;
  if (auto s = UringBundleSource::create(path, why)) return s;
  fmt::print(stderr, "note: io_uring is unavailable for '{}' ({}); reading with pread threads\n",
             path, why);
#endif
  return std::make_unique<FileBundleSource>(path);
}

}  // namespace strata
