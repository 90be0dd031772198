#include "tiers/bundle_source.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
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
        read(q.dst, q.bytes, q.offset);
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

// Keeps up to kDepth reads in flight from the calling thread; a completion that is short or
// failed is an error like FileBundleSource's (a short read is resubmitted for the rest first).
class UringBundleSource final : public BundleSource {
 public:
  static constexpr unsigned kDepth = 64;

  // Null (and `why` set) when the kernel refuses a ring or direct I/O.
  static std::unique_ptr<UringBundleSource> create(const std::string& path, std::string& why) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
      why = fmt::format("no direct I/O: {}", std::strerror(errno));
      return nullptr;
    }
    std::unique_ptr<UringBundleSource> s(new UringBundleSource(path, fd));
    const int rc = io_uring_queue_init(kDepth, &s->ring_, 0);
    if (rc != 0) {
      why = std::strerror(-rc);
      return nullptr;
    }
    s->ring_ready_ = true;
    return s;
  }
  ~UringBundleSource() override {
    if (ring_ready_) io_uring_queue_exit(&ring_);
    ::close(fd_);
  }

  void read(void* dst, uint64_t bytes, uint64_t offset) override { file_.read(dst, bytes, offset); }

  void read_batch(std::span<const ReadRequest> requests, ThreadPool&) override {
    struct Pending {
      char* dst;
      uint64_t left, offset;
    };
    std::vector<Pending> work;
    for (const ReadRequest& q : requests)
      work.push_back({static_cast<char*>(q.dst), q.bytes, q.offset});
    size_t next = 0, in_flight = 0;
    std::string failure;
    auto submit = [&](size_t i) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      io_uring_prep_read(sqe, fd_, work[i].dst, static_cast<unsigned>(work[i].left),
                         work[i].offset);
      io_uring_sqe_set_data64(sqe, i);
      ++in_flight;
    };
    while (next < work.size() || in_flight > 0) {
      while (next < work.size() && in_flight < kDepth && failure.empty()) submit(next++);
      if (in_flight == 0) break;
      io_uring_submit(&ring_);
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc < 0) fail("io_uring wait on '{}' failed: {}", file_.describe(), std::strerror(-rc));
      const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --in_flight;
      Pending& p = work[i];
      if (res < 0) {
        if (failure.empty())
          failure = fmt::format("reading neurons from '{}' at offset {} failed: {}",
                                file_.describe(), p.offset, std::strerror(-res));
      } else if (res == 0) {
        if (failure.empty())
          failure = fmt::format(
              "'{}' ended at offset {} while reading neurons (was it truncated after loading?)",
              file_.describe(), p.offset);
      } else if (static_cast<uint64_t>(res) < p.left) {
        p.dst += res, p.left -= static_cast<uint64_t>(res), p.offset += static_cast<uint64_t>(res);
        if (failure.empty()) submit(i);
      }
    }
    if (!failure.empty()) fail("{}", failure);
  }

  std::string describe() const override { return file_.describe() + " via io_uring"; }
  int queue_depth() const override { return static_cast<int>(kDepth); }

 private:
  UringBundleSource(const std::string& path, int fd) : file_(path), fd_(fd) {}

  FileBundleSource file_;
  int fd_;
  io_uring ring_{};
  bool ring_ready_ = false;
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
