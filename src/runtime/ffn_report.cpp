#include "runtime/ffn_report.h"

#include <algorithm>

namespace strata {

namespace {
// Input sparsity (--sparsity-mode): per matrix input (TEAL) or of the gate's activations (CATS)
// the share of values kept over every layer and token (1 where a threshold of 0 drops nothing),
// and the share of the layers' weights whose input values were
// non-zero (what column-sparse products need to read).
nlohmann::json input_sparsity_json(const Model& model, const Session& session) {
  const SessionOptions& o = session.options();
  if (o.sparsity.mode == SparsityMode::Off) return nullptr;
  const ModelConfig& c = model.config;
  nlohmann::json density = nlohmann::json::object();
  double needed = 0, all = 0;
  for (int p = 0; p < kSparsityPoints; ++p) {
    uint64_t seen = 0, kept = 0;
    for (const InputDensity& d : session.input_density()) {
      seen += d.seen[static_cast<size_t>(p)];
      kept += d.kept[static_cast<size_t>(p)];
    }
    const double share = seen > 0 ? static_cast<double>(kept) / static_cast<double>(seen) : 1.0;
    if (p == kGatePoint) {
      if (o.sparsity.mode == SparsityMode::Cats) density["ffn_gate_activation"] = share;
      continue;
    }
    const auto which = static_cast<MatrixInput>(p);
    if (o.sparsity.mode == SparsityMode::Teal) density[matrix_input_name(which)] = share;
    const double weights = static_cast<double>(matrix_input_weights(which, c));
    all += weights;
    needed += weights * share;
  }
  if (o.sparsity.mode == SparsityMode::Cats) {
    // CATS: the gate is read whole; up rows and down columns only where the gate is kept.
    const double share = density["ffn_gate_activation"].get<double>();
    const double gate = static_cast<double>(c.n_embd * c.n_ff);
    needed = all - 2 * gate * (1 - share) - static_cast<double>(c.n_ff * c.n_embd) * (1 - share);
  }
  return {{"mode", sparsity_mode_name(o.sparsity.mode)},
          {"level", o.sparsity.level},
          {"density", density},
          {"layer_weights_needed", all > 0 ? needed / all : 1.0}};
}

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
  // A split FFN: where the activations were computed (PowerInfer's GPU share).
  nlohmann::json split = nullptr;
  const double on_device = static_cast<double>(session.split_device_pairs());
  const double in_ram = static_cast<double>(session.split_ram_pairs());
  if (!session.options().vram_neurons.empty()) {
    const Session::SplitTraffic t = session.split_traffic();
    const double tokens = std::max<double>(1.0, static_cast<double>(session.tokens_evaluated()));
    split = {{"device_activations", on_device},
             {"ram_activations", in_ram},
             {"device_share", on_device + in_ram > 0 ? on_device / (on_device + in_ram) : 0.0},
             {"per_token_over_all_tokens",
              {{"device_neuron_bytes", t.device_row_bytes / tokens},
               {"ram_neuron_bytes", t.ram_row_bytes / tokens},
               {"flash_bytes", static_cast<double>(session.flash_stats().bytes_read) / tokens},
               {"link_bytes", t.link_bytes / tokens}}},
             {"time_s",
              {{"device_part", session.times().ffn_device_part},
               {"ram_part", session.times().ffn_ram_part},
               {"cpu_waiting_for_device", session.times().ffn_host_waits},
               {"device_waiting_for_cpu", session.times().ffn_device_waits}}}};
  }
  return {{"ffn_mode", ffn_mode_name(session.options().ffn)},
          {"input_sparsity", input_sparsity_json(model, session)},
          {"flash", flash},
          {"split", split},
          {"layers", layers},
          {"time_s",
           {{"attention", t.attention},
            {"predictor", t.predictor},
            {"ffn", t.ffn},
            {"output", t.output}}}};
}

}  // namespace strata
