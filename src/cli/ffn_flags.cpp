#include "cli/ffn_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "cli/flag_checks.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/matvec.h"
#include "core/error.h"
#include "core/input_file.h"
#include "offline/profile.h"
#include "tiers/bundle_layout.h"

namespace strata {

void add_ffn_flags(CLI::App* cmd, FfnFlags& f) {
  cmd->add_option("--ffn", f.mode,
                  "FFN mode: dense, predict (predictors pick the neurons; default when the model "
                  "has them), gate-first (exact; ReLU-family models), auto")
      ->check(CLI::IsMember({"auto", "dense", "predict", "gate-first"}));
  cmd->add_flag("--check-predictor", f.check_predictor,
                "Predict mode: also compute the true activations and report the predictor's "
                "recall and precision (slower)");
  cmd->add_option("--ram-budget", f.ram_budget,
                  "Hard cap on the memory strata keeps (e.g. 16G): weights, KV cache, buffers "
                  "and, for bundled models, the neuron caches")
      ->check(kNotEmpty);
  cmd->add_option("--storage-profile", f.storage_profile,
                  "Bundled models: disk measurements from strata probe-storage (default: "
                  "MODEL.storage.json when it exists)");
  cmd->add_option("--profile", f.profile,
                  "Bundled models: a strata profile of the model (or of the file it was bundled "
                  "from); its hottest neurons are pinned in the neuron caches");
  cmd->add_option("--pin-share", f.pin_share,
                  "With --profile: share of each layer's neuron cache given to pinned neurons")
      ->check(in_range(0.0, 0.95));
  cmd->add_flag(
      "!--no-repack", f.repack,
      "Keep Q4_0/Q8_0 weights in the file's row layout instead of interleaving them by 16 "
      "rows at load (llama.cpp's --no-repack)");
  cmd->add_option("--cache-type-k", f.cache_type_k,
                  "KV cache type for keys: f32 or f16 (half the memory)");
  cmd->add_option("--cache-type-v", f.cache_type_v,
                  "KV cache type for values: f32 or f16 (half the memory)");
  cmd->add_flag("--lookahead", f.lookahead,
                "Bundled models: read the next layer's guessed neurons during its attention");
  cmd->add_flag("--split-reads", f.split_reads,
                "Bundled models: read a missing neuron's gate row first and the rest only if it "
                "fires (fewer bytes, one more round of reads per layer)");
  cmd->add_option("--window", f.window,
                  "Bundled models: tokens a neuron stays cached after its last use")
      ->check(in_range(1, 1 << 20));
}

namespace {
// "4.55 GiB", "12.3 MiB": sizes in the plan and in errors.
std::string size_text(double bytes) {
  if (bytes >= 1073741824.0) return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
  return fmt::format("{:.1f} MiB", bytes / 1048576.0);
}
}  // namespace

uint64_t parse_bytes(const std::string& text, const char* flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    fail("{} '{}' is not a size (e.g. 16G, 1500M, 123456)", flag, text);
  }
  std::string unit = text.substr(used);
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double mult = 1;
  if (unit == "K" || unit == "KB" || unit == "KIB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    fail("{} '{}' has an unknown unit (K, M, G)", flag, text);
  if (!(value > 0) || value * mult > 1e18) fail("{} '{}' is out of range", flag, text);
  return static_cast<uint64_t>(value * mult);
}

namespace {

// Per layer, the `count` neurons that fired most often in the profile (only ones that fired),
// sorted by id. The profile must come from this model or the file it was bundled from.
std::vector<std::vector<int32_t>> hottest_neurons(const Model& model, const std::string& path,
                                                  int64_t count) {
  const std::string source = model.file->get_string(kBundleSourceHashKey, "");
  if (source.empty())
    fail("'{}' does not say which file it was bundled from; bundle it again to use --profile",
         model.file->path());
  const NeuronProfile p = read_profile(path, source);
  const ModelConfig& c = model.config;
  if (static_cast<int64_t>(p.counts.size()) != c.n_layer)
    fail("profile '{}' has {} layers, the model {}", path, p.counts.size(), c.n_layer);
  std::vector<std::vector<int32_t>> pinned(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const auto& counts = p.counts[static_cast<size_t>(l)];
    if (static_cast<int64_t>(counts.size()) != c.n_ff)
      fail("profile '{}' has {} neurons in layer {}, the model {}", path, counts.size(), l, c.n_ff);
    std::vector<int32_t> order(static_cast<size_t>(c.n_ff));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return counts[a] > counts[b]; });
    auto& keep = pinned[static_cast<size_t>(l)];
    for (int64_t k = 0; k < count && counts[order[k]] > 0; ++k) keep.push_back(order[k]);
    std::sort(keep.begin(), keep.end());
  }
  return pinned;
}

}  // namespace

SessionOptions resolve_ffn_flags(const FfnFlags& f, Model& model, int64_t n_ctx,
                                 StorageProfile* storage) {
  SessionOptions o;
  o.window = f.window;
  o.lookahead = f.lookahead;
  o.split_reads = f.split_reads;
  if (storage != nullptr && model.weights.bundled) {
    const std::string beside = model.file->path() + ".storage.json";
    const std::string file = !f.storage_profile.empty()
                                 ? f.storage_profile
                                 : (is_regular_file(beside) ? beside : std::string());
    if (!file.empty()) {
      *storage = StorageProfile::from_json_file(file);
      o.storage = storage;
      fmt::print(stderr, "storage profile: {} ({} points)\n", file, storage->points.size());
    }
  }
  if (f.mode == "auto")
    o.ffn = model.weights.has_predictors ? FfnMode::Predict : FfnMode::Dense;
  else if (f.mode == "predict")
    o.ffn = FfnMode::Predict;
  else if (f.mode == "gate-first")
    o.ffn = FfnMode::GateFirst;
  else
    o.ffn = FfnMode::Dense;
  o.check_predictor = f.check_predictor;
  auto kv_type = [](const std::string& name, const char* flag) {
    const auto t = dtype_from_name(name);
    if (!t || (*t != DType::F32 && *t != DType::F16))
      fail("{} '{}' is not one of f32, f16", flag, name);
    return *t;
  };
  o.k_type = kv_type(f.cache_type_k, "--cache-type-k");
  o.v_type = kv_type(f.cache_type_v, "--cache-type-v");
  Session::check_options(model, o);
  const ModelConfig& c = model.config;
  const uint64_t kv = Session::kv_cache_bytes(c, n_ctx, o.k_type, o.v_type);
  // Scratch: per-token buffers for a batch of Session::kMaxBatch, scores, sparse buffers: a
  // generous bound, plus 16 MiB for the process itself (code, libraries, allocator slack).
  const uint64_t scratch = static_cast<uint64_t>(Session::kMaxBatch) *
                               static_cast<uint64_t>(8 * c.n_embd + 8 * c.n_ff + c.n_head * n_ctx) *
                               sizeof(float) +
                           (16ull << 20);
  if (model.weights.bundled) {
    const BundleLayout& bl = model.weights.bundle;
    const uint64_t on_flash = bl.bundle_bytes * static_cast<uint64_t>(c.n_ff * c.n_layer);
    // The embedding table stays in the file too (a hole in Model::load's copy): Session reads
    // each token's row into a one-row buffer. A row and a page of the table stay in the plan
    // as slack for that buffer (and, with --mmap, for the pages a row touches).
    const ModelWeights& w = model.weights;
    const bool embedding_on_flash = w.token_embd.data != w.output.data;
    const uint64_t embedding =
        embedding_on_flash ? w.token_embd.bytes() - w.token_embd.row_bytes - (8ull << 10) : 0;
    const uint64_t resident = model.file->file_size() - on_flash - embedding;
    if (!f.ram_budget.empty()) {
      // A thirty-second of the budget stays unplanned: the page tables and the page cache a
      // memory cgroup charges to the process (~0.14 GB of file pages at 7B). Planned without
      // it, a 6.3 GiB cgroup filled up and its reclaim slowed decode.
      const uint64_t budget_all = parse_bytes(f.ram_budget, "--ram-budget");
      const uint64_t budget = budget_all - budget_all / 32;
      const int64_t minimum_slots = std::max<int64_t>(64, c.n_ff / 8);
      const uint64_t minimum = resident + kv + scratch +
                               static_cast<uint64_t>(minimum_slots * c.n_layer) * bl.bundle_bytes;
      if (budget < minimum)
        fail(
            "--ram-budget {} is below the minimum {} for '{}' (attention, output, norms and "
            "predictors {}, KV cache {}, buffers {}, {} neurons per layer {}, and 1/32 of the "
            "budget kept free)",
            size_text(budget_all), size_text(minimum + (minimum + 30) / 31), model.file->path(),
            size_text(resident), size_text(kv), size_text(scratch), minimum_slots,
            size_text(minimum - resident - kv - scratch));
      o.cache_neurons = std::min<int64_t>(
          c.n_ff, static_cast<int64_t>((budget - resident - kv - scratch) /
                                       (static_cast<uint64_t>(c.n_layer) * bl.bundle_bytes)));
    }
    const int64_t slots = o.cache_neurons > 0 ? o.cache_neurons : c.n_ff;
    int64_t pinned = 0;
    if (!f.profile.empty()) {
      o.pinned = hottest_neurons(
          model, f.profile,
          std::min<int64_t>(slots - 1,
                            static_cast<int64_t>(f.pin_share * static_cast<double>(slots))));
      for (const auto& l : o.pinned)
        pinned = std::max<int64_t>(pinned, static_cast<int64_t>(l.size()));
    }
    fmt::print(stderr,
               "memory plan: resident {} (attention, output, norms, predictors), KV cache {}, "
               "neuron cache {} of {} neurons per layer ({}, window {}, {} pinned), FFN{} on "
               "flash {}\n",
               size_text(resident), size_text(kv), slots, c.n_ff,
               size_text(static_cast<double>(slots * c.n_layer) * bl.bundle_bytes), f.window,
               pinned, embedding_on_flash ? " and embedding rows" : "",
               size_text(on_flash + embedding));
  } else if (!f.profile.empty()) {
    fail("--profile pins neurons in the flash tier's caches: '{}' is not bundled (strata bundle)",
         model.file->path());
  } else if (!f.ram_budget.empty()) {
    const uint64_t budget = parse_bytes(f.ram_budget, "--ram-budget");
    const uint64_t need = model.file->file_size() + kv + scratch;
    if (need > budget)
      fail(
          "'{}' needs {} in RAM (weights {}, KV cache {}, buffers {}), over --ram-budget {}; "
          "`strata bundle` it to keep the FFN on flash",
          model.file->path(), size_text(need), size_text(model.file->file_size()), size_text(kv),
          size_text(scratch), size_text(budget));
  }
  if (o.ffn != FfnMode::Dense && !model.weights.has_down_t && !model.weights.bundled) {
    const uint64_t bytes = model.ensure_down_t();
    fmt::print(stderr,
               "note: '{}' has no ffn_down_t; transposed ffn_down at load ({:.1f} MiB more "
               "memory{}). strata train-predictors writes files that carry it.\n",
               model.file->path(), bytes / 1048576.0,
               needs_q8_input(model.weights.layers[0].ffn_down.type)
                   ? "; quantized weights were re-quantized along the new rows"
                   : "");
  }
  // After ensure_down_t, which reads ffn_down's rows.
  model.adopt_layouts(
      [&](const MatrixView& m, WeightUse use) { return CpuBackend::layout_for(m, use, f.repack); },
      o.ffn == FfnMode::Dense);
  return o;
}

std::vector<FfnLayerStats> stats_difference(const std::vector<FfnLayerStats>& after,
                                            const std::vector<FfnLayerStats>& before) {
  std::vector<FfnLayerStats> d = after;
  for (size_t i = 0; i < d.size(); ++i) {
    d[i].computed -= before[i].computed;
    d[i].nonzero -= before[i].nonzero;
    d[i].truly_active -= before[i].truly_active;
    d[i].predicted -= before[i].predicted;
    d[i].predicted_and_active -= before[i].predicted_and_active;
  }
  return d;
}

uint64_t bytes_touched_per_token(const Model& model, FfnMode mode,
                                 const std::vector<FfnLayerStats>& stats, double tokens) {
  const ModelWeights& w = model.weights;
  uint64_t total = w.output.bytes() + w.token_embd.row_bytes;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    total += l.attn_q.bytes() + l.attn_k.bytes() + l.attn_v.bytes() + l.attn_output.bytes();
    if (mode == FfnMode::Dense) {
      total += l.ffn_gate.bytes() + l.ffn_up.bytes() +
               (l.ffn_down.data != nullptr ? l.ffn_down.bytes() : l.ffn_down_t.bytes());
      continue;
    }
    const double per_token = tokens > 0 ? static_cast<double>(stats[i].computed) / tokens : 0.0;
    uint64_t row = l.ffn_up.row_bytes + l.ffn_down_t.row_bytes;
    if (mode == FfnMode::Predict) {
      row += l.ffn_gate.row_bytes;
      total += l.predictor.fc1.bytes() + l.predictor.fc2.bytes();
    } else {
      total += ffn_has_gate(model.config.ffn) ? l.ffn_gate.bytes() : 0;
    }
    total += static_cast<uint64_t>(per_token * static_cast<double>(row));
  }
  return total;
}

namespace {
nlohmann::json flash_json(const Session& session) {
  const NeuronCacheStats s = session.flash_stats();
  const double tokens = static_cast<double>(std::max<uint64_t>(1, session.tokens_evaluated()));
  const double requests = static_cast<double>(s.hits + s.misses);
  return {{"bytes_read_per_token", s.bytes_read / tokens},
          {"pinned_bytes", s.pin_bytes},
          {"reads_per_token", s.reads / tokens},
          {"cache_hit_rate", requests > 0 ? s.hits / requests : 0.0},
          {"io_wait_s", s.read_seconds},
          {"bytes_read", s.bytes_read},
          {"evictions", s.evictions},
          {"cache_slots_per_layer",
           session.neuron_caches().empty() ? 0 : session.neuron_caches()[0]->capacity()}};
}
}  // namespace

nlohmann::json ffn_report_json(const Model& model, const Session& session) {
  const double total = static_cast<double>(session.ffn_activations_per_layer());
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < session.ffn_stats().size(); ++i) {
    const FfnLayerStats& s = session.ffn_stats()[i];
    nlohmann::json l = {{"layer", i},
                        {"computed_density", total > 0 ? s.computed / total : 0.0},
                        {"nonzero_density", total > 0 ? s.nonzero / total : 0.0}};
    if (session.options().check_predictor) {
      l["true_density"] = total > 0 ? s.truly_active / total : 0.0;
      l["recall"] = s.truly_active ? double(s.predicted_and_active) / s.truly_active : 1.0;
      l["precision"] = s.predicted ? double(s.predicted_and_active) / s.predicted : 1.0;
    }
    if (model.weights.layers[i].predictor.present())
      l["predictor_rank"] = model.weights.layers[i].predictor.rank();
    layers.push_back(l);
  }
  const ForwardTimes& t = session.times();
  nlohmann::json flash = nullptr;
  if (!session.neuron_caches().empty()) flash = flash_json(session);
  return {{"ffn_mode", ffn_mode_name(session.options().ffn)},
          {"flash", flash},
          {"layers", layers},
          {"time_s",
           {{"attention", t.attention},
            {"predictor", t.predictor},
            {"ffn", t.ffn},
            {"output", t.output}}}};
}

void print_ffn_report(const Model& model, const Session& session, std::FILE* out) {
  const nlohmann::json j = ffn_report_json(model, session);
  const bool check = session.options().check_predictor;
  fmt::print(out, "FFN mode {}: per layer density computed / non-zero{}\n",
             j["ffn_mode"].get<std::string>(), check ? " / true, predictor recall, precision" : "");
  for (const auto& l : j["layers"]) {
    fmt::print(out, "  layer {:>3}: {:.3f} / {:.3f}", l["layer"].get<int>(),
               l["computed_density"].get<double>(), l["nonzero_density"].get<double>());
    if (check)
      fmt::print(out, " / {:.3f}, recall {:.4f}, precision {:.3f}", l["true_density"].get<double>(),
                 l["recall"].get<double>(), l["precision"].get<double>());
    if (l.contains("predictor_rank"))
      fmt::print(out, "  (rank {})", l["predictor_rank"].get<int>());
    fmt::print(out, "\n");
  }
  const auto& t = j["time_s"];
  const double sum = t["attention"].get<double>() + t["predictor"].get<double>() +
                     t["ffn"].get<double>() + t["output"].get<double>();
  auto pct = [&](const char* k) { return sum > 0 ? 100 * t[k].get<double>() / sum : 0.0; };
  fmt::print(
      out, "time: attention {:.1f}%, predictor {:.1f}%, FFN {:.1f}%, output {:.1f}% of {:.3f} s\n",
      pct("attention"), pct("predictor"), pct("ffn"), pct("output"), sum);
  if (!j["flash"].is_null()) {
    const auto& fl = j["flash"];
    fmt::print(out,
               "flash: {:.2f} MiB read per token in {:.1f} reads, cache hit rate {:.3f}, I/O wait "
               "{:.3f} s, {} slots per layer\n",
               fl["bytes_read_per_token"].get<double>() / 1048576.0,
               fl["reads_per_token"].get<double>(), fl["cache_hit_rate"].get<double>(),
               fl["io_wait_s"].get<double>(), fl["cache_slots_per_layer"].get<int64_t>());
  }
}

}  // namespace strata
