// The flash tier's column caches under a RAM budget (column-bundled models, strata bundle
// --columns): every layer's caches hold the same share of its gate/up and of its down column
// bundles (a TEAL level keeps about the same share of each input's columns, so no layer's or
// input's cache is worth more per byte), the largest share whose caches fit the room the rest
// of the plan leaves. A pure function: the plan decides, the session applies.
#pragma once

#include <cstdint>
#include <span>

#include "tiers/column_bundle_layout.h"

namespace strata {

struct ColumnCachePlan {
  double share = 1.0;  // of each layer's column bundles (FlashColumnStore's options)
  uint64_t bytes = 0;  // the caches' buffers and bookkeeping at that share
};

// room == 0: no budget (every column cached once read). Fails with one line naming the bytes
// when even the smallest caches (FlashColumnStore::capacity_for) do not fit.
ColumnCachePlan plan_column_caches(uint64_t room, bool budgeted,
                                   std::span<const ColumnBundleLayout> layers);

// Bytes a token reads from flash: per layer each part's columns the token wants (its
// density: the share of the input's values above threshold) that its cache misses. A cache is
// taken to hold a random selection of its capacity (FlashColumnStore::capacity_for at `share`) (TEAL's columns of a random-weight model have
// no favourites; a trained model's outlier channels make it an upper bound).
struct ColumnDensity {
  double gate_up = 1.0, down = 1.0;  // share of the layer's FFN input, activations above threshold
};
double column_flash_bytes_per_token(std::span<const ColumnBundleLayout> layouts, double share,
                                    std::span<const ColumnDensity> layers);

}  // namespace strata
