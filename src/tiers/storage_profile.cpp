#include "tiers/storage_profile.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_limits.h"
#include "core/timer.h"

namespace strata {

double StorageProfile::read_seconds(uint64_t bytes, int depth) const {
  if (points.empty()) return 0;
  // The measured depth nearest in log scale.
  int best_depth = points[0].queue_depth;
  for (const auto& p : points)
    if (std::fabs(std::log2(static_cast<double>(p.queue_depth)) - std::log2(depth)) <
        std::fabs(std::log2(static_cast<double>(best_depth)) - std::log2(depth)))
      best_depth = p.queue_depth;
  std::vector<const StoragePoint*> row;
  for (const auto& p : points)
    if (p.queue_depth == best_depth) row.push_back(&p);
  std::sort(row.begin(), row.end(), [](const StoragePoint* a, const StoragePoint* b) {
    return a->chunk_bytes < b->chunk_bytes;
  });
  // Throughput at this size: interpolated in log(size) between neighbours, clamped at the ends.
  double bps = row.front()->bytes_per_second;
  if (bytes >= row.back()->chunk_bytes) {
    bps = row.back()->bytes_per_second;
  } else {
    for (size_t i = 1; i < row.size(); ++i)
      if (bytes <= row[i]->chunk_bytes) {
        const double x0 = std::log2(static_cast<double>(row[i - 1]->chunk_bytes));
        const double x1 = std::log2(static_cast<double>(row[i]->chunk_bytes));
        const double t =
            std::clamp((std::log2(static_cast<double>(bytes)) - x0) / (x1 - x0), 0.0, 1.0);
        bps = row[i - 1]->bytes_per_second +
              t * (row[i]->bytes_per_second - row[i - 1]->bytes_per_second);
        break;
      }
  }
  return static_cast<double>(bytes) / std::max(bps, 1.0);
}

bool StorageProfile::merge_cheaper(uint64_t a, uint64_t gap, uint64_t b, int depth) const {
  if (points.empty()) return gap <= (16u << 10);
  return read_seconds(a + gap + b, depth) < read_seconds(a, depth) + read_seconds(b, depth);
}

std::string StorageProfile::to_json() const {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : points)
    pts.push_back({{"chunk_bytes", p.chunk_bytes},
                   {"queue_depth", p.queue_depth},
                   {"bytes_per_second", p.bytes_per_second},
                   {"reads_per_second", p.reads_per_second}});
  return nlohmann::json{{"path", path}, {"points", pts}}.dump(2);
}

StorageProfile StorageProfile::from_json_file(const std::string& file) {
  return from_json(read_regular_file(file, kMaxJsonFileBytes, "a storage profile"), file);
}

StorageProfile StorageProfile::from_json(std::string_view text, const std::string& file) {
  StorageProfile p;
  try {
    const auto j = parse_json_bounded(text, fmt::format("storage profile '{}'", file));
    p.path = j.at("path").get<std::string>();
    for (const auto& q : j.at("points")) {
      // The placement solver divides by these: each must be a measurement a disk can give,
      // checked for its kind before it is converted (a float read as an integer is undefined).
      const auto bad = [&] {
        fail(
            "storage profile '{}': point {} is not a measurement (chunk_bytes 1..1 GiB, "
            "queue_depth 1..65536, finite positive rates)",
            file, p.points.size());
      };
      const auto& chunk = q.at("chunk_bytes");
      const auto& depth = q.at("queue_depth");
      const auto& bytes_s = q.at("bytes_per_second");
      const auto& reads_s = q.at("reads_per_second");
      if (!chunk.is_number_unsigned() || !depth.is_number_unsigned() || !bytes_s.is_number() ||
          !reads_s.is_number())
        bad();
      if (chunk.get<uint64_t>() == 0 || chunk.get<uint64_t>() > (uint64_t{1} << 30) ||
          depth.get<uint64_t>() == 0 || depth.get<uint64_t>() > 65536)
        bad();
      const StoragePoint s{chunk.get<uint64_t>(), static_cast<int>(depth.get<uint64_t>()),
                           bytes_s.get<double>(), reads_s.get<double>()};
      if (!std::isfinite(s.bytes_per_second) || !(s.bytes_per_second > 0) ||
          !std::isfinite(s.reads_per_second) || s.reads_per_second < 0)
        bad();
      p.points.push_back(s);
    }
  } catch (const nlohmann::json::exception& e) {
    fail("storage profile '{}' is not valid: {}", file, e.what());
  }
  if (p.points.empty()) fail("storage profile '{}' has no measurements", file);
  return p;
}

StorageProfile probe_storage(const std::string& path, double seconds_per_point,
                             const std::function<void(int, int)>& progress) {
  const int fd = open_regular_file(path, O_DIRECT);
  const off_t size = ::lseek(fd, 0, SEEK_END);
  const std::vector<uint64_t> chunks = {4u << 10,  8u << 10,   16u << 10,  32u << 10,
                                        64u << 10, 128u << 10, 256u << 10, 1u << 20};
  const std::vector<int> depths = {1, 4, 16, 64};
  if (size < static_cast<off_t>(64u << 20)) {
    ::close(fd);
    fail("'{}' is too small to measure a disk ({} bytes; give a file of at least 64 MiB)", path,
         size);
  }
  StorageProfile profile;
  profile.path = path;
  int done = 0;
  for (int depth : depths)
    for (uint64_t chunk : chunks) {
      // `depth` threads, each with its own aligned buffer, reading at random aligned offsets
      // (pread blocks, so the thread count is the number of reads in flight).
      std::atomic<uint64_t> reads{0};
      std::atomic<bool> stop{false}, failed{false};
      std::vector<std::thread> threads;
      Timer t;
      for (int i = 0; i < depth; ++i)
        threads.emplace_back([&, i] {
          void* buf = std::aligned_alloc(4096, chunk);
          uint64_t s = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1) + chunk;
          const uint64_t slots = static_cast<uint64_t>(size) / chunk;
          while (!stop.load(std::memory_order_relaxed)) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const uint64_t off = (s >> 20) % slots * chunk;
            if (::pread(fd, buf, chunk, static_cast<off_t>(off)) != static_cast<ssize_t>(chunk)) {
              failed = true;
              break;
            }
            reads.fetch_add(1, std::memory_order_relaxed);
          }
          std::free(buf);
        });
      while (t.seconds() < seconds_per_point && !failed)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      stop = true;
      for (auto& th : threads) th.join();
      const double secs = t.seconds();
      if (failed) {
        ::close(fd);
        fail("reading '{}' failed while probing", path);
      }
      profile.points.push_back(
          {chunk, depth, reads * static_cast<double>(chunk) / secs, reads / secs});
      if (progress) progress(++done, static_cast<int>(depths.size() * chunks.size()));
    }
  ::close(fd);
  return profile;
}

}  // namespace strata
