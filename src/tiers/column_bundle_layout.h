// The flash layout of an FFN for input-sparse products (TEAL, docs/INPUT_SPARSITY.md): per
// layer two sets of column bundles, each padded to a multiple of 4 KiB so one aligned read
// fetches it:
//   gate/up: input j's bundle is column j of gate then column j of up (the weights input value j
//            meets, 2 x n_ff values): tensor `blk.N.ffn_gate_up_columns`, [gate_up_bytes, n_embd]
//            of I8; without a gate (plain ReLU/GELU FFNs) up's column alone;
//   down:    neuron i's bundle is column i of down (its ffn_down_t row, n_embd values): tensor
//            `blk.N.ffn_down_columns`, [down_bytes, n_ff] of I8.
// A token then reads the gate/up bundles of its FFN inputs above threshold and the down bundles
// of its activations above threshold; neuron bundles (bundle_layout.h) would have to be read
// whole for every neuron, since every gate/up row meets every input. Float types only (F32,
// F16, BF16): column bundles of Q8_0's column groups (tensor/column_groups.h: a group's scales
// shared by 32 inputs) are not built yet; other quantized columns are slower than rows.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "tiers/bundle_layout.h"

namespace strata {

// "columns" in files with column bundles (the neuron-bundle keys are absent from them).
inline constexpr const char* kColumnBundleKindKey = "strata.bundle.kind";
inline constexpr const char* kColumnBundleKind = "columns";

struct ColumnBundleLayout {
  DType type = DType::F32;
  int64_t n_embd = 0, n_ff = 0;
  bool has_gate = true;
  uint64_t column_bytes = 0;    // one column of gate or up (n_ff values)
  uint64_t gate_up_bytes = 0;   // stride between gate/up bundles
  uint64_t down_row_bytes = 0;  // one column of down (n_embd values)
  uint64_t down_bytes = 0;      // stride between down bundles
  int64_t gate_up_values() const { return (has_gate ? 2 : 1) * n_ff; }
  uint64_t gate_up_layer_bytes() const { return gate_up_bytes * static_cast<uint64_t>(n_embd); }
  uint64_t down_layer_bytes() const { return down_bytes * static_cast<uint64_t>(n_ff); }
  uint64_t layer_bytes() const { return gate_up_layer_bytes() + down_layer_bytes(); }

  static ColumnBundleLayout make(DType type, int64_t n_embd, int64_t n_ff, bool has_gate) {
    ColumnBundleLayout l{type, n_embd, n_ff, has_gate, 0, 0, 0, 0};
    l.column_bytes = row_bytes(type, static_cast<uint64_t>(n_ff));
    l.gate_up_bytes = padded_to_bundle_align((has_gate ? 2 : 1) * l.column_bytes);
    l.down_row_bytes = row_bytes(type, static_cast<uint64_t>(n_embd));
    l.down_bytes = padded_to_bundle_align(l.down_row_bytes);
    return l;
  }
  // The layouts of the two caches (NeuronCache counts bundles as its n_ff).
  BundleLayout gate_up_cache() const { return cache(n_embd, gate_up_bytes); }
  BundleLayout down_cache() const { return cache(n_ff, down_bytes); }

 private:
  BundleLayout cache(int64_t count, uint64_t stride) const {
    BundleLayout b;
    b.type = type;
    b.n_embd = n_embd;
    b.n_ff = count;
    b.has_gate = has_gate;
    b.row_bytes = stride;
    b.bundle_bytes = stride;
    return b;
  }
};

}  // namespace strata
