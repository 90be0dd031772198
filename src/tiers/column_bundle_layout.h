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
// whole for every neuron, since every gate/up row meets every input.
// Float types hold plain columns. Quantized types (those with column groups, Q8_0, Q4_0,
// Q2_K..Q6_K) hold rows of the matrices' column-group copies (tensor/column_groups.h): gate/up's
// bundle j is input j's row of the stacked gate/up copy (gate's outputs, then up's), down's
// bundle i input i's row of down's copy; their scales, shared by a group of inputs, stay in RAM
// as each copy's scale plane (`blk.N.ffn_gate_up_column_scales`, `blk.N.ffn_down_column_scales`,
// I8 of plane bytes), so a bundle holds only what its own input needs.
#pragma once

#include <cstdint>

#include "tensor/column_groups.h"
#include "tensor/dtype.h"
#include "tiers/bundle_layout.h"

namespace strata {

// "columns" in files with column bundles (the neuron-bundle keys are absent from them).
inline constexpr const char* kColumnBundleKindKey = "strata.bundle.kind";
inline constexpr const char* kColumnBundleKind = "columns";
// Quantized column bundles: each layer's gate/up and down type ids (an array, two a layer).
inline constexpr const char* kColumnBundleTypesKey = "strata.bundle.column_types";

// One layer's column bundles. Quantized models may give a layer's down projection another type
// than its gate/up (llama.cpp's _M mixtures: ffn_down Q6_K in some layers of a Q4_K_M file), so
// each layer has its own layout (LayerWeights::column_bundle); the shape is every layer's.
struct ColumnBundleLayout {
  DType type = DType::F32;       // gate/up's (and a float FFN's every) type
  DType down_type = DType::F32;  // down's
  int64_t n_embd = 0, n_ff = 0;
  bool has_gate = true;
  uint64_t column_bytes = 0;    // one column of gate or up (n_ff values)
  uint64_t gate_up_bytes = 0;   // stride between gate/up bundles
  uint64_t down_row_bytes = 0;  // one column of down (n_embd values)
  uint64_t down_bytes = 0;      // stride between down bundles
  // Quantized types: the scale planes' bytes (0 for float types).
  uint64_t gate_up_plane_bytes = 0, down_plane_bytes = 0;
  bool groups() const { return !is_float_type(type); }  // rows of column-group copies
  // Inputs quantized together by the products (a Q8_0/Q4_0 group, a K-quant super-block; a
  // float type's columns each on their own): a pass of the products never splits them, so a
  // product in passes quantizes its input as one pass does.
  static int64_t pass_unit(DType t) {
    return is_float_type(t) ? 1 : has_block_column_groups(t) ? kColumnGroup : kQK_K;
  }
  int64_t gate_up_pass_unit() const { return pass_unit(type); }
  int64_t down_pass_unit() const { return pass_unit(down_type); }
  int64_t gate_up_values() const { return (has_gate ? 2 : 1) * n_ff; }
  uint64_t gate_up_layer_bytes() const { return gate_up_bytes * static_cast<uint64_t>(n_embd); }
  uint64_t down_layer_bytes() const { return down_bytes * static_cast<uint64_t>(n_ff); }
  uint64_t layer_bytes() const { return gate_up_layer_bytes() + down_layer_bytes(); }
  uint64_t plane_bytes() const { return gate_up_plane_bytes + down_plane_bytes; }

  // Whether column bundles can hold gate/up of `type` and down of `down` in this shape: float
  // types both, or types with column groups whose copies fit (outputs by 64 or 128 per part,
  // inputs by the type's block).
  static bool holds(DType type, DType down, int64_t n_embd, int64_t n_ff) {
    if (is_float_type(type) || is_float_type(down))
      return is_float_type(type) && is_float_type(down);
    return column_groups_fit(type, n_ff, n_embd) && column_groups_fit(down, n_embd, n_ff);
  }
  static ColumnBundleLayout make(DType type, int64_t n_embd, int64_t n_ff, bool has_gate) {
    return make(type, type, n_embd, n_ff, has_gate);
  }
  // (holds must be true.)
  static ColumnBundleLayout make(DType type, DType down_type, int64_t n_embd, int64_t n_ff,
                                 bool has_gate) {
    ColumnBundleLayout l{type, down_type, n_embd, n_ff, has_gate};
    const bool groups = !is_float_type(type);
    l.column_bytes = groups ? column_group_input_bytes(type, n_ff)
                            : row_bytes(type, static_cast<uint64_t>(n_ff));
    l.gate_up_bytes = padded_to_bundle_align((has_gate ? 2 : 1) * l.column_bytes);
    l.down_row_bytes = groups ? column_group_input_bytes(down_type, n_embd)
                              : row_bytes(down_type, static_cast<uint64_t>(n_embd));
    l.down_bytes = padded_to_bundle_align(l.down_row_bytes);
    if (groups) {
      l.gate_up_plane_bytes = column_group_plane_bytes(type, n_embd, l.gate_up_values());
      l.down_plane_bytes = column_group_plane_bytes(down_type, n_ff, n_embd);
    }
    return l;
  }
  // The layouts of the two caches (NeuronCache counts bundles as its n_ff).
  BundleLayout gate_up_cache() const { return cache(type, n_embd, gate_up_bytes); }
  BundleLayout down_cache() const { return cache(down_type, n_ff, down_bytes); }

 private:
  BundleLayout cache(DType t, int64_t count, uint64_t stride) const {
    BundleLayout b;
    b.type = t;
    b.n_embd = n_embd;
    b.n_ff = count;
    b.has_gate = has_gate;
    b.row_bytes = stride;
    b.bundle_bytes = stride;
    return b;
  }
};

}  // namespace strata
