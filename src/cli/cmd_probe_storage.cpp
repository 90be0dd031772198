// strata probe-storage: measure read throughput versus chunk size and queue depth on the disk
// holding a file, and store the curve for the flash tier's read-merging decisions.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/input_file.h"
#include "tiers/storage_profile.h"

namespace strata {

Command add_probe_storage_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("probe-storage",
                                 "Measure direct-read throughput by chunk size and queue depth");
  struct Options {
    std::string path, out;
    double seconds = 0.3;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("path", o->path, "A large file on the disk to measure (e.g. the model)")
      ->required();
  cmd->add_option("-o,--output", o->out,
                  "Where to store the curve (default: PATH.storage.json, "
                  "which runs of that model find by themselves)");
  cmd->add_option("--seconds", o->seconds, "Seconds per measured point")
      ->check(in_range(0.01, 60.0));
  cmd->add_flag("--json", o->json, "Print the curve as JSON");
  return {
      cmd, [o] {
        ProgressBar bar("probe");
        const StorageProfile p =
            probe_storage(o->path, o->seconds, [&](int d, int t) { bar.update(d, t, "points"); });
        bar.finish();
        const std::string out = o->out.empty() ? o->path + ".storage.json" : o->out;
        write_text_file(out, p.to_json() + "\n");
        if (o->json) {
          fmt::print("{}\n", p.to_json());
          return 0;
        }
        fmt::print("direct reads of '{}' (MB/s), stored in {}\n", o->path, out);
        fmt::print("{:>10}", "chunk");
        for (int d : {1, 4, 16, 64}) fmt::print(" {:>9}", fmt::format("QD {}", d));
        fmt::print("\n");
        for (size_t i = 0; i < p.points.size() / 4; ++i) {
          fmt::print("{:>8}KiB", p.points[i].chunk_bytes / 1024);
          for (size_t d = 0; d < 4; ++d)
            fmt::print(" {:>9.0f}", p.points[d * (p.points.size() / 4) + i].bytes_per_second / 1e6);
          fmt::print("\n");
        }
        return 0;
      }};
}

}  // namespace strata
