#include "placement/column_cache.h"

#include "core/error.h"
#include "placement/plan.h"
#include "tiers/flash_column_store.h"

namespace strata {

ColumnCachePlan plan_column_caches(uint64_t room, bool budgeted,
                                   std::span<const ColumnBundleLayout> layers) {
  const auto bytes = [&](double share) { return FlashColumnStore::bytes(layers, share); };
  if (!budgeted || bytes(1.0) <= room) return {1.0, bytes(1.0)};
  // The smallest share counts: a cache never holds fewer than capacity_for's minimum.
  constexpr double kSmallest = 1e-6;
  if (bytes(kSmallest) > room)
    fail(
        "--ram-budget leaves {} for the flash tier's column caches, which need at least {} (a "
        "pass of columns per layer)",
        size_text(static_cast<double>(room)), size_text(static_cast<double>(bytes(kSmallest))));
  // bytes() grows with the share: the largest share that fits, to 1e-4 (a few columns).
  double lo = kSmallest, hi = 1.0;
  while (hi - lo > 1e-4) {
    const double mid = (lo + hi) / 2;
    (bytes(mid) <= room ? lo : hi) = mid;
  }
  return {lo, bytes(lo)};
}

double column_flash_bytes_per_token(std::span<const ColumnBundleLayout> layouts, double share,
                                    std::span<const ColumnDensity> layers) {
  if (layouts.size() != layers.size())
    fail("column flash bytes: {} layouts for {} layers", layouts.size(), layers.size());
  // Each cache's own share of its columns (a cache never holds fewer than a pass's minimum).
  const auto missed = [&](int64_t count, int64_t unit) {
    return 1.0 - static_cast<double>(FlashColumnStore::capacity_for(count, share, unit)) /
                     static_cast<double>(count);
  };
  double total = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const ColumnBundleLayout& b = layouts[l];
    total += layers[l].gate_up * missed(b.n_embd, b.gate_up_pass_unit()) *
                 static_cast<double>(b.gate_up_layer_bytes()) +
             layers[l].down * missed(b.n_ff, b.down_pass_unit()) *
                 static_cast<double>(b.down_layer_bytes());
  }
  return total;
}

}  // namespace strata
