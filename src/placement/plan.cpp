#include "placement/plan.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>

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
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= n)
      fail("plan: layer {}'s '{}' has an id outside 0..{}", layer, what, n - 1);
    ids.push_back(v.get<int32_t>());
    if (ids.size() > 1 && ids[ids.size() - 2] >= ids.back())
      fail("plan: layer {}'s '{}' is not ascending and distinct", layer, what);
  }
  return ids;
}

Device device_from(const nlohmann::json& j, const char* what) {
  const std::string name = j.is_string() ? j.get<std::string>() : "";
  if (name == "host") return Device::Host;
  if (name == "cuda") return Device::Cuda;
  fail("plan: '{}' must be \"host\" or \"cuda\"", what);
}

}  // namespace

nlohmann::json plan_to_json(const PlacementPlan& p) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerPlan& lp = p.layers[l];
    layers.push_back({{"layer", l},
                      {"attention", device_name(lp.attention)},
                      {"kv", device_name(lp.attention)},
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
          {"budgets", {{"ram", p.budgets.ram}, {"vram", p.budgets.vram}}},
          {"costs", costs_json(p.costs)},
          {"output", device_name(p.output)},
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
  PlacementPlan p;
  try {
    p.solver = j.value("solver", "file");
    p.bundled = j.value("bundled", false);
    if (p.bundled != inv.bundled)
      fail("plan: it was made for a {} model, this one is {}", p.bundled ? "bundled" : "RAM",
           inv.bundled ? "bundled" : "in RAM");
    p.budgets.ram = j.at("budgets").value("ram", uint64_t{0});
    p.budgets.vram = j.at("budgets").value("vram", uint64_t{0});
    p.output = device_from(j.at("output"), "output");
  } catch (const nlohmann::json::exception& e) {
    fail("plan: {}", e.what());
  }
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    const nlohmann::json& jl = j["layers"][l];
    const int64_t n = inv.layers[l].n_neurons;
    if (!jl.is_object()) fail("plan: layer {} is not an object", l);
    LayerPlan lp;
    lp.attention = device_from(jl.value("attention", nlohmann::json()), "attention");
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

std::string plan_summary(const PlacementPlan& p, const Inventory& inv) {
  int64_t vram = 0, pinned = 0, gpu_layers = 0, min_slots = INT64_MAX, max_slots = 0;
  for (const LayerPlan& lp : p.layers) {
    vram += static_cast<int64_t>(lp.vram.size());
    pinned += static_cast<int64_t>(lp.pinned.size());
    gpu_layers += lp.attention == Device::Cuda;
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
  s += fmt::format("; per token {} from RAM", size_text(t.ram_bytes_per_token));
  if (inv.bundled) s += fmt::format(", {} from flash", size_text(t.flash_bytes_per_token));
  if (gpu) s += fmt::format(", {} from VRAM", size_text(t.vram_bytes_per_token));
  s += fmt::format("; predicted {:.1f} tok/s", t.tokens_per_s());
  return s;
}

}  // namespace strata
