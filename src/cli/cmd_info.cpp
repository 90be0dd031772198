// strata info FILE [--json]: metadata and tensor table of any GGUF file.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "format/file_type.h"
#include "format/gguf.h"
#include "model/expert_summary.h"

namespace strata {

namespace {

nlohmann::json value_json(const GgufValue& v, size_t max_items) {
  if (v.type == GgufType::Array) {
    nlohmann::json items = nlohmann::json::array();
    for (size_t i = 0; i < v.items.size() && i < max_items; ++i)
      items.push_back(value_json(v.items[i], max_items));
    return {{"type", "array"},
            {"item_type", gguf_type_name(v.array_type)},
            {"length", v.items.size()},
            {"items", items}};
  }
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v.scalar);
}

// The mixture name llama.cpp prints for the file ("Q4_K - Medium", "(guessed) Q8_0").
std::string mixture_name(const GgufFile& f) {
  std::optional<uint32_t> file_type;
  if (f.find("general.file_type") != nullptr)
    file_type = static_cast<uint32_t>(f.get_int("general.file_type"));
  std::vector<DType> types;
  for (const auto& t : f.tensors()) types.push_back(t.type);
  return file_mixture_name(file_type, types);
}

}  // namespace

Command add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print a GGUF file's metadata and tensor table");
  struct Options {
    std::string path;
    bool json = false;
    size_t max_items = 8;
  };
  auto o = std::make_shared<Options>();
  auto* file = cmd->add_option("file", o->path, "GGUF model file");
  cmd->add_option("-m,--model", o->path, "GGUF model file (as llama.cpp's tools take it)")
      ->excludes(file);
  cmd->add_flag("--json", o->json, "Print JSON instead of text");
  cmd->add_option("--max-items", o->max_items, "Array items to show per key");
  return {
      cmd, [o] {
        if (o->path.empty()) fail("info needs a file: strata info FILE (or -m FILE)");
        const auto f = GgufFile::open(o->path);
        if (o->json) {
          nlohmann::json j;
          j["file"] = o->path;
          j["format"] = f->is_powerinfer() ? "PowerInfer GGUF (PWRI)" : "GGUF";
          j["version"] = f->version();
          j["alignment"] = f->alignment();
          j["file_size"] = f->file_size();
          j["file_type"] = mixture_name(*f);
          nlohmann::json kv = nlohmann::json::object();
          for (const auto& [k, v] : f->metadata()) kv[k] = value_json(v, o->max_items);
          j["metadata"] = kv;
          nlohmann::json ts = nlohmann::json::array();
          for (const auto& t : f->tensors())
            ts.push_back({{"name", t.name},
                          {"type", dtype_name(t.type)},
                          {"dims", t.dims},
                          {"offset", t.offset},
                          {"bytes", t.n_bytes}});
          j["tensors"] = ts;
          if (const ExpertSummary e = summarize_experts(*f); e.n_expert > 0)
            j["experts"] = {{"count", e.n_expert},
                            {"used_per_token", e.n_expert_used},
                            {"layers", e.moe_layers},
                            {"layout", e.stacked ? "stacked" : "one tensor per expert"},
                            {"router_bytes", e.router_bytes},
                            {"expert_bytes", e.expert_bytes},
                            {"shared_expert_bytes", e.shared_bytes},
                            {"active_expert_bytes_per_token", e.active_expert_bytes()}};
          fmt::print("{}\n", j.dump(2));
          return 0;
        }
        fmt::print("file:      {}\n", o->path);
        fmt::print("format:    {} version {}{}\n", "GGUF", f->version(),
                   f->is_powerinfer() ? " (PowerInfer file, magic PWRI)" : "");
        fmt::print("size:      {} bytes, data at {}, alignment {}\n", f->file_size(),
                   f->data_offset(), f->alignment());
        fmt::print("file type: {}\n", mixture_name(*f));
        fmt::print("metadata:  {} keys\n", f->metadata().size());
        for (const auto& [k, v] : f->metadata())
          fmt::print("  {:<44} {:<7} {}\n", k, gguf_type_name(v.type), v.to_display(o->max_items));
        uint64_t total = 0;
        for (const auto& t : f->tensors()) total += t.n_bytes;
        if (const ExpertSummary e = summarize_experts(*f); e.n_expert > 0)
          fmt::print(
              "experts:   {} per layer, {} used per token, in {} layers ({}); experts {:.2f} "
              "MB ({:.1f}% of the tensors), a token reads {:.2f} MB of them; routers {:.2f} "
              "MB{}\n",
              e.n_expert, e.n_expert_used, e.moe_layers,
              e.stacked ? "stacked" : "one tensor per expert", e.expert_bytes / 1e6,
              total > 0 ? 100.0 * static_cast<double>(e.expert_bytes) / total : 0.0,
              e.active_expert_bytes() / 1e6, e.router_bytes / 1e6,
              e.shared_bytes > 0
                  ? fmt::format("; shared experts {:.2f} MB (every token)", e.shared_bytes / 1e6)
                  : "");
        fmt::print("tensors:   {} ({:.2f} MB)\n", f->tensors().size(), total / 1e6);
        for (const auto& t : f->tensors())
          fmt::print("  {:<36} {:<5} {:<22} {:>12} bytes @ {}\n", t.name, dtype_name(t.type),
                     fmt::format("[{}]", fmt::join(t.dims, ", ")), t.n_bytes, t.offset);
        return 0;
      }};
}

}  // namespace strata
