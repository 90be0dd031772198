// strata bundle: write a model with its FFN as neuron bundles (predict mode) or, with
// --columns, as column bundles (TEAL input sparsity), for running from flash.
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/input_file.h"
#include "model/flash_route.h"
#include "offline/bundle.h"
#include "offline/column_bundle.h"
#include "tiers/storage_profile.h"

namespace strata {

namespace {

// Bundles are read from the disk they are written to: a bundle large enough to measure that
// disk with gets its read curve beside it (OUT.storage.json, what runs of it find by
// themselves), so plans predict its reads at this disk's rates, not a guess.
void probe_beside(const std::string& bundle, bool wanted) {
  constexpr uint64_t kMinProbedBytes = uint64_t{256} << 20;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(bundle, ec);
  if (!wanted || ec || bytes < kMinProbedBytes) return;
  ProgressBar bar("probe the disk");
  const StorageProfile p =
      probe_storage(bundle, 0.1, [&](int d, int t) { bar.update(d, t, "points"); });
  bar.finish();
  write_text_file(bundle + ".storage.json", p.to_json() + "\n");
  fmt::print("the disk's read rates: {}.storage.json (strata probe-storage measures again)\n",
             bundle);
}

}  // namespace

Command add_bundle_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bundle", "Store each FFN neuron's gate, up and down weights together, for the flash tier");
  struct Options {
    std::string model, out;
    bool columns = false, no_probe = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("-m,--model", o->model, "GGUF model with predictors")->required();
  cmd->add_option("-o,--output", o->out, "Bundled GGUF file to write")->required();
  cmd->add_flag("--columns", o->columns,
                "Column bundles (each FFN input's gate/up columns, each neuron's down column) "
                "for --sparsity-mode teal/cats or a dense FFN from flash; F32/F16/BF16 models, and "
                "Q8_0/Q4_0/Q2_K..Q6_K models of one FFN type");
  cmd->add_flag("--no-probe", o->no_probe,
                "Do not measure the disk's read rates beside a bundle of 256 MiB or more");
  return {
      cmd, [o] {
        const auto model = Model::load(o->model, false, LoadMode::Map);
        if (o->columns) {
          ProgressBar bar("bundle");
          const std::vector<ColumnBundleLayout> layers = write_column_bundled_model(
              *model, o->out, [&](uint64_t d, uint64_t t) { bar.update(d, t); });
          bar.finish();
          Model::load(o->out, false, LoadMode::Map);  // what was written loads
          const ColumnBundleLayout& b = layers[0];
          uint64_t planes = 0;
          std::string downs;  // the down types of a mixture, by layer
          for (const ColumnBundleLayout& l : layers) {
            planes += l.plane_bytes();
            if (l.down_type != b.type) downs = " (down types differ by layer)";
          }
          fmt::print(
              "wrote {}: {} layers x ({} gate/up column bundles of {} bytes, {} down column "
              "bundles of {} bytes), {}{}{}\n",
              o->out, model->config.n_layer, b.n_embd, b.gate_up_bytes, b.n_ff, b.down_bytes,
              dtype_name(b.type), downs,
              planes > 0 ? fmt::format("; scale planes in RAM {:.1f} MiB", planes / 1048576.0)
                         : "");
          probe_beside(o->out, !o->no_probe);
          return 0;
        }
        if (!model->weights.has_predictors)
          fail("'{}' has no predictors (the flash tier's neuron bundles read predicted neurons): {}",
               o->model, flash_route(model->config, false));
        ProgressBar bar("bundle");
        const BundleReport report =
            write_bundled_model(*model, o->out, [&](uint64_t d, uint64_t t) { bar.update(d, t); });
        bar.finish();
        if (report.requantized_layers > 0)
          fmt::print(stderr,
                     "note: {} layers have FFN rows of other types than {}: their bundles "
                     "hold them requantized to {}\n",
                     report.requantized_layers, dtype_name(report.type), dtype_name(report.type));
        const auto out = Model::load(o->out, false, LoadMode::Map);
        const BundleLayout& b = out->weights.bundle;
        fmt::print("wrote {}: {} layers x {} neurons, {} bytes per bundle ({} of weights)\n",
                   o->out, out->config.n_layer, out->config.ffn_neurons(), b.bundle_bytes,
                   b.payload_bytes());
        probe_beside(o->out, !o->no_probe);
        return 0;
      }};
}

}  // namespace strata
