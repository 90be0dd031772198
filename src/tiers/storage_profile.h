// What the disk does with reads of each size at each queue depth, measured by
// `strata probe-storage` (O_DIRECT reads at random aligned offsets of a file, through
// io_uring), and the decision it feeds: whether two runs of neurons separated by a gap are
// cheaper read as one (reading the gap too) or as two requests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

struct StoragePoint {
  uint64_t chunk_bytes = 0;
  int queue_depth = 0;
  double bytes_per_second = 0;
  double reads_per_second = 0;
};

struct StorageProfile {
  std::string path;  // what was measured
  std::vector<StoragePoint> points;

  // Seconds one read of `bytes` costs when `depth` reads are in flight (interpolated in chunk
  // size between measured points; the nearest measured depth).
  double read_seconds(uint64_t bytes, int depth) const;
  // True when reading `gap` extra bytes to join two reads of a and b bytes is cheaper than two
  // reads. Without measurements: merge gaps up to 16 KiB.
  bool merge_cheaper(uint64_t a, uint64_t gap, uint64_t b, int depth) const;

  std::string to_json() const;
  static StorageProfile from_json_file(const std::string& file);  // fails clearly
  // The same from the file's text; `file` names it in errors.
  static StorageProfile from_json(std::string_view text, const std::string& file);
};

// Measures `path` (a large file on the disk of interest; the model itself will do):
// chunk sizes 4 KiB .. 1 MiB x queue depths 1 .. 64, about `seconds_per_point` each.
StorageProfile probe_storage(const std::string& path, double seconds_per_point,
                             const std::function<void(int, int)>& progress = {});

}  // namespace strata
