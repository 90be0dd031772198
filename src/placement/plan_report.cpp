// strata plan --html: per layer a horizontal bar of its neurons by tier and the dense blocks'
// device, inline SVG, no scripts or external files.
#include <fmt/format.h>

#include "core/html_escape.h"
#include "placement/plan.h"

namespace strata {

namespace {

struct TierStyle {
  Tier tier;
  const char* color;
  const char* label;
};
constexpr TierStyle kStyles[] = {{Tier::Vram, "#2e7d32", "VRAM"},
                                 {Tier::RamPinned, "#1565c0", "RAM, pinned"},
                                 {Tier::Ram, "#64b5f6", "RAM"},
                                 {Tier::Flash, "#ffb74d", "flash (window cache)"}};

}  // namespace

std::string plan_report_html(const PlacementPlan& p, const Inventory& inv,
                             const std::string& model_name) {
  constexpr int kBar = 640, kRow = 18, kLeft = 120;
  const int height = static_cast<int>(p.layers.size()) * kRow + 40;
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' "
      "font-size='11'>\n",
      kLeft + kBar + 160, height);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerPlan& lp = p.layers[l];
    const double n = static_cast<double>(inv.layers[l].n_neurons);
    const int64_t vram = static_cast<int64_t>(lp.vram.size());
    const int64_t pinned = static_cast<int64_t>(lp.pinned.size());
    const int64_t rest = inv.layers[l].n_neurons - vram - pinned;
    const int y = static_cast<int>(l) * kRow + 10;
    svg += fmt::format("<text x='0' y='{}'>layer {} ({})</text>\n", y + 12, l,
                       lp.attention == Device::Accelerator ? "GPU" : "CPU");
    double x = kLeft;
    const std::pair<Tier, int64_t> parts[] = {
        {Tier::Vram, vram}, {Tier::RamPinned, pinned}, {p.bundled ? Tier::Flash : Tier::Ram, rest}};
    for (const auto& [tier, count] : parts) {
      if (count <= 0) continue;
      const double w = kBar * static_cast<double>(count) / n;
      for (const TierStyle& s : kStyles)
        if (s.tier == tier)
          svg += fmt::format(
              "<rect x='{:.1f}' y='{}' width='{:.1f}' height='{}' fill='{}'><title>{}: {} "
              "neurons</title></rect>\n",
              x, y, w, kRow - 4, s.color, s.label, count);
      x += w;
    }
    if (p.bundled)
      svg += fmt::format("<text x='{}' y='{}'>{} cache slots</text>\n", kLeft + kBar + 8, y + 12,
                         lp.cache_slots);
  }
  svg += "</svg>\n";
  std::string legend;
  for (const TierStyle& s : kStyles)
    legend += fmt::format(
        "<span style='display:inline-block;width:12px;height:12px;background:{}'></span> {} "
        "&nbsp; ",
        s.color, s.label);
  const PlanPrediction& t = p.predicted;
  return fmt::format(
      "<!doctype html><html><head><meta charset='utf-8'><title>strata plan: {0}</title>"
      "</head><body style='font-family:sans-serif'><h2>Placement plan: {0}</h2>"
      "<p>solver {1}; budgets RAM {2:.1f} MiB, VRAM {3:.1f} MiB; held RAM {4:.1f} MiB, VRAM "
      "{5:.1f} MiB</p><p>per token: RAM {6:.2f} MiB, flash {7:.2f} MiB, VRAM {8:.2f} MiB, host "
      "link {9:.3f} MiB; predicted {10:.1f} tok/s</p><p>{11}</p>{12}</body></html>\n",
      html_escape(model_name), p.solver, p.budgets.ram / 1048576.0, p.budgets.vram / 1048576.0,
      t.ram_bytes / 1048576.0, t.vram_bytes / 1048576.0, t.ram_bytes_per_token / 1048576.0,
      t.flash_bytes_per_token / 1048576.0, t.vram_bytes_per_token / 1048576.0,
      t.link_bytes_per_token / 1048576.0, t.tokens_per_s(), legend, svg);
}

}  // namespace strata
