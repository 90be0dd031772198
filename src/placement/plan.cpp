#include "placement/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace strata {

Tier PlacementPlan::tier(int64_t l, int32_t id) const {
  const LayerPlan& lp = layers[static_cast<size_t>(l)];
  if (std::binary_search(lp.vram.begin(), lp.vram.end(), id)) return Tier::Vram;
  if (std::binary_search(lp.pinned.begin(), lp.pinned.end(), id)) return Tier::RamPinned;
  return bundled ? Tier::Flash : Tier::Ram;
}

namespace {

nlohmann::json costs_json(const CostModel& c) {
  return {{"ram_bytes_per_s", c.ram_bytes_per_s},
          {"vram_bytes_per_s", c.vram_bytes_per_s},
          {"link_bytes_per_s", c.link_bytes_per_s},
          {"flash_neuron_s", c.flash_neuron_s},
          {"sync_s", c.sync_s}};
}

// Ascending, distinct ids within [0, n) or a failure naming the list.
std::vector<int32_t> id_list(const nlohmann::json& j, int64_t n, const char* what, size_t layer) {
  std::vector<int32_t> ids;
  if (!j.is_array()) fail("plan: layer {}'s '{}' is not a list of neuron ids", layer, what);
  for (const auto& v : j) {
    if (!v.is_number_integer())
      fail("plan: layer {}'s '{}' has {}, not a neuron id", layer, what, v.dump().substr(0, 32));
    if (v.get<int64_t>() < 0 || v.get<int64_t>() >= n)
      fail("plan: layer {}'s '{}' has an id outside 0..{}", layer, what, n - 1);
    ids.push_back(v.get<int32_t>());
    if (ids.size() > 1 && ids[ids.size() - 2] >= ids.back())
      fail("plan: layer {}'s '{}' is not ascending and distinct", layer, what);
  }
  return ids;
}

// The plan format's names of where a block lives: "host", and "cuda" for a device's memory
// (the word saved plans carry since version 1).
const char* plan_device_name(Device d) {
  return d == Device::Host ? "host" : "cuda";
}

Device device_from(const nlohmann::json& j, const std::string& what) {
  const std::string name = j.is_string() ? j.get<std::string>() : "";
  if (name == "host") return Device::Host;
  if (name == "cuda") return Device::Accelerator;
  fail("plan: '{}' must be \"host\" or \"cuda\"", what);
}

// A byte count of the plan's budgets: absent is 0 (no limit), otherwise a whole number >= 0.
uint64_t budget_from(const nlohmann::json& budgets, const char* what) {
  if (!budgets.contains(what)) return 0;
  const nlohmann::json& v = budgets[what];
  if (!v.is_number_unsigned()) fail("plan: budgets.{} must be a whole number of bytes", what);
  return v.get<uint64_t>();
}

}  // namespace

nlohmann::json plan_to_json(const PlacementPlan& p) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerPlan& lp = p.layers[l];
    layers.push_back({{"layer", l},
                      {"attention", plan_device_name(lp.attention)},
                      {"kv", plan_device_name(lp.attention)},
                      {"vram", lp.vram},
                      {"pinned", lp.pinned},
                      {"cache_slots", lp.cache_slots}});
  }
  const PlanPrediction& t = p.predicted;
  return {{"format", "strata-plan"},
          {"version", 1},
          {"solver", p.solver},
          {"status", p.status},
          {"lower_bound_s", p.lower_bound_s},
          {"bundled", p.bundled},
          {"column_share", p.column_share},
          {"column_cache_bytes", p.column_cache_bytes},
          {"budgets", {{"ram", p.budgets.ram}, {"vram", p.budgets.vram}}},
          {"costs", costs_json(p.costs)},
          {"output", plan_device_name(p.output)},
          {"predicted",
           {{"tokens_per_s", t.tokens_per_s()},
            {"seconds_per_token", t.seconds_per_token},
            {"vram_bytes_per_token", t.vram_bytes_per_token},
            {"ram_bytes_per_token", t.ram_bytes_per_token},
            {"flash_bytes_per_token", t.flash_bytes_per_token},
            {"link_bytes_per_token", t.link_bytes_per_token},
            {"vram_bytes", t.vram_bytes},
            {"ram_bytes", t.ram_bytes}}},
          {"layers", layers}};
}

PlacementPlan plan_from_json(const nlohmann::json& j, const Inventory& inv) {
  if (!j.is_object() || j.value("format", "") != "strata-plan")
    fail("plan: not a strata plan (no \"format\": \"strata-plan\")");
  if (!j.contains("layers") || !j["layers"].is_array() || j["layers"].size() != inv.layers.size())
    fail("plan: it has {} layers, the model {}",
         j.contains("layers") && j["layers"].is_array() ? j["layers"].size() : 0,
         inv.layers.size());
  // Each field is checked for its kind and range before use: a field of the wrong kind is a
  // one-line error naming it, never a library's exception text.
  const nlohmann::json version = j.value("version", nlohmann::json());
  if (version != 1)
    fail("plan: version {} is not one this strata reads (1)", version.dump().substr(0, 32));
  PlacementPlan p;
  const nlohmann::json solver = j.value("solver", nlohmann::json("file"));
  if (!solver.is_string()) fail("plan: 'solver' must be a name");
  p.solver = solver.get<std::string>().substr(0, 64);
  const nlohmann::json bundled = j.value("bundled", nlohmann::json(false));
  if (!bundled.is_boolean()) fail("plan: 'bundled' must be true or false");
  p.bundled = bundled.get<bool>();
  if (p.bundled != inv.bundled)
    fail("plan: it was made for a {} model, this one is {}", p.bundled ? "bundled" : "RAM",
         inv.bundled ? "bundled" : "in RAM");
  if (!j.contains("budgets") || !j["budgets"].is_object())
    fail("plan: 'budgets' (an object with ram and vram bytes) is missing");
  p.budgets.ram = budget_from(j["budgets"], "ram");
  p.budgets.vram = budget_from(j["budgets"], "vram");
  p.output = device_from(j.value("output", nlohmann::json()), "output");
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    const nlohmann::json& jl = j["layers"][l];
    const int64_t n = inv.layers[l].n_neurons;
    if (!jl.is_object()) fail("plan: layer {} is not an object", l);
    // Layers are listed in order, each once: an index elsewhere is a duplicated, missing or
    // reordered layer (an edit gone wrong), not something to guess about.
    const nlohmann::json index = jl.value("layer", nlohmann::json());
    if (!index.is_number_integer() || index.get<int64_t>() != static_cast<int64_t>(l))
      fail("plan: entry {} of 'layers' says \"layer\": {}; layers must be listed 0..{} in order", l,
           index.dump().substr(0, 32), inv.layers.size() - 1);
    LayerPlan lp;
    lp.attention = device_from(jl.value("attention", nlohmann::json()),
                               fmt::format("layer {}'s attention", l));
    // The KV cache lives where the attention runs; the field only says so.
    if (jl.contains("kv") && device_from(jl["kv"], fmt::format("layer {}'s kv", l)) != lp.attention)
      fail("plan: layer {}'s kv must be where its attention is ({})", l,
           plan_device_name(lp.attention));
    lp.vram = id_list(jl.value("vram", nlohmann::json::array()), n, "vram", l);
    lp.pinned = id_list(jl.value("pinned", nlohmann::json::array()), n, "pinned", l);
    const nlohmann::json slots = jl.value("cache_slots", nlohmann::json(0));
    if (!slots.is_number_integer() || slots.get<int64_t>() < 0 || slots.get<int64_t>() > n)
      fail("plan: layer {}'s cache_slots must be a whole number 0..{}", l, n);
    lp.cache_slots = slots.get<int64_t>();
    if (inv.bundled && lp.cache_slots <= static_cast<int64_t>(lp.pinned.size()))
      fail("plan: layer {} pins {} neurons in a cache of {} slots", l, lp.pinned.size(),
           lp.cache_slots);
    p.layers.push_back(std::move(lp));
  }
  return p;
}

std::string size_text(double bytes) {
  if (bytes >= 1073741824.0) return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
  return fmt::format("{:.1f} MiB", bytes / 1048576.0);
}

std::vector<int64_t> neurons_per_expert(std::span<const int32_t> ids, int64_t expert_neurons,
                                        int64_t n_neurons) {
  if (expert_neurons <= 0) return {};
  std::vector<int64_t> counts(static_cast<size_t>(n_neurons / expert_neurons), 0);
  for (const int32_t id : ids)
    if (id >= 0 && id < n_neurons) ++counts[static_cast<size_t>(id / expert_neurons)];
  return counts;
}

std::vector<uint8_t> whole_experts(std::span<const int32_t> ids, int64_t expert_neurons,
                                   int64_t n_neurons, int64_t layer) {
  std::vector<uint8_t> held;
  const std::vector<int64_t> counts = neurons_per_expert(ids, expert_neurons, n_neurons);
  for (size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] != 0 && counts[e] != expert_neurons)
      fail(
          "layer {}: the device holds {} of expert {}'s {} neurons; a dense mixture computes each "
          "expert whole, on one device",
          layer, counts[e], e, expert_neurons);
    held.push_back(counts[e] == expert_neurons ? 1 : 0);
  }
  return held;
}

std::string plan_summary(const PlacementPlan& p, const Inventory& inv, PredictionShown prediction) {
  int64_t vram = 0, pinned = 0, gpu_layers = 0, min_slots = INT64_MAX, max_slots = 0;
  for (const LayerPlan& lp : p.layers) {
    vram += static_cast<int64_t>(lp.vram.size());
    pinned += static_cast<int64_t>(lp.pinned.size());
    gpu_layers += lp.attention == Device::Accelerator;
    min_slots = std::min(min_slots, lp.cache_slots);
    max_slots = std::max(max_slots, lp.cache_slots);
  }
  const PlanPrediction& t = p.predicted;
  std::string s = fmt::format("plan ({}): {} layers", p.solver, p.layers.size());
  const bool gpu = p.budgets.vram > 0 || t.vram_bytes > 0;
  if (gpu)
    s += fmt::format(", VRAM {} ({} attention blocks, {} neurons)", size_text(t.vram_bytes),
                     gpu_layers, vram);
  s += fmt::format(", RAM {}", size_text(static_cast<double>(t.ram_bytes)));
  if (inv.bundled)
    s += fmt::format(" (cache {}..{} slots per layer, {} pinned)", min_slots, max_slots, pinned);
  if (p.column_cache_bytes > 0)
    s += fmt::format(" (column caches {}: {:.1f}% of the FFN's columns)",
                     size_text(static_cast<double>(p.column_cache_bytes)), 100.0 * p.column_share);
  s += fmt::format("; per token {} from RAM", size_text(t.ram_bytes_per_token));
  if (inv.bundled || inv.column_bundled)
    s += fmt::format(", {} from flash", size_text(t.flash_bytes_per_token));
  if (gpu) s += fmt::format(", {} from VRAM", size_text(t.vram_bytes_per_token));
  if (prediction == PredictionShown::Yes)
    s += fmt::format("; predicted {:.1f} tok/s", t.tokens_per_s());
  return s;
}

}  // namespace strata
