#include "model/column_group_copy.h"

#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "tensor/column_groups.h"
#include "tensor/dtype.h"
#include "tensor/kquants.h"

namespace strata {

namespace {

int64_t stacked_outputs(std::span<const MatrixView> parts) {
  int64_t n = 0;
  for (const MatrixView& m : parts) n += m.rows;
  return n;
}

}  // namespace

bool column_groups_apply(std::span<const MatrixView> parts) {
  if (parts.empty()) return false;
  for (const MatrixView& m : parts)
    if (m.data == nullptr || m.type != parts[0].type || m.layout != Layout::Rows ||
        m.cols != parts[0].cols)
      return false;
  return column_groups_fit(parts[0].type, stacked_outputs(parts), parts[0].cols);
}

uint64_t column_groups_copy_bytes(std::span<const MatrixView> parts) {
  const int64_t n_out = stacked_outputs(parts), n_in = parts[0].cols;
  const DType type = parts[0].type;
  if (!has_block_column_groups(type))
    return static_cast<uint64_t>(n_in / kQK_K) * k_column_layout(type).super_bytes(n_out);
  return static_cast<uint64_t>(n_in / kColumnGroup) * column_group_bytes(type, n_out);
}

namespace {

// Output i's super-block of a K-quant row, regrouped (the layout of tensor/column_groups.h,
// which reads it back: k_column_scales, k_column_row): d (and dmin), each group's scale (and
// min), each value.
template <class Block>
void copy_k_super(const Block& block, const KColumnLayout& k, int64_t n_out, int64_t i,
                  uint8_t* super) {
  using K = KQuant<Block>;
  const uint64_t n = static_cast<uint64_t>(n_out), at = static_cast<uint64_t>(i);
  auto* d = reinterpret_cast<uint16_t*>(super);
  d[at] = K::d_bits(block);
  if (k.has_min) d[n + at] = K::dmin_bits(block);
  const int64_t p = column_group_position(i), c = p % kColumnChunk;
  const uint64_t chunk = static_cast<uint64_t>((p - c) / kColumnChunk * k.chunk_bytes);
  const int groups_per_16 = static_cast<int>(k.group / 16);  // K's scales are per 16 values
  for (int s = 0; s < k.groups(); ++s) {
    uint8_t* group = super + n * sizeof(uint16_t) * (k.has_min ? 2 : 1) + s * k.group_bytes(n_out);
    group[at] = static_cast<uint8_t>(K::scale(block, s * groups_per_16));
    if (k.has_min) group[n + at] = static_cast<uint8_t>(K::min(block, s * groups_per_16));
    uint8_t* rows = group + n * (k.has_min ? 2 : 1);
    for (int t = 0; t < k.group; ++t) {
      uint8_t* row = rows + static_cast<uint64_t>(t) * k.row_bytes(n_out) + chunk;
      const int q = K::quant(block, static_cast<int>(k.group) * s + t);
      if constexpr (K::type == DType::Q2_K || K::type == DType::Q3_K) {
        row[c % 16] |= static_cast<uint8_t>((q & 3) << (2 * (c / 16)));
        if constexpr (K::type == DType::Q3_K)
          row[16 + c % 8] |= static_cast<uint8_t>((q >> 2) << (c / 8));
        continue;
      }
      row[c % 32] |= static_cast<uint8_t>((q & 15) << (c < 32 ? 0 : 4));
      if constexpr (K::type == DType::Q5_K)
        row[32 + c % 8] |= static_cast<uint8_t>((q >> 4) << (c / 8));
      if constexpr (K::type == DType::Q6_K)
        row[32 + c % 16] |= static_cast<uint8_t>((q >> 4) << (2 * (c / 16)));
    }
  }
}

template <class Block>
void build_k_groups(std::span<const MatrixView> parts, int64_t n_out, int64_t n_in, uint8_t* out) {
  const KColumnLayout k = k_column_layout(parts[0].type);
  for (int64_t b = 0; b < n_in / kQK_K; ++b) {
    uint8_t* super = out + static_cast<uint64_t>(b) * k.super_bytes(n_out);
    int64_t i = 0;  // the output in the stacked order
    for (const MatrixView& m : parts)
      for (int64_t r = 0; r < m.rows; ++r, ++i)
        copy_k_super(reinterpret_cast<const Block*>(m.row(r))[b], k, n_out, i, super);
  }
}

// Output i's block g of a Q8_0 or Q4_0 row into its group: the scale and each input's quant.
void copy_q8_0_block(const BlockQ8_0& block, int64_t n_out, int64_t i, uint8_t* group) {
  reinterpret_cast<uint16_t*>(group)[i] = block.d;
  const int64_t at = column_group_position(i);
  uint8_t* rows = group + n_out * sizeof(uint16_t);
  for (int64_t t = 0; t < kColumnGroup; ++t)
    rows[t * n_out + at] = static_cast<uint8_t>(block.qs[t]);
}

void copy_q4_0_block(const BlockQ4_0& block, int64_t n_out, int64_t i, uint8_t* group) {
  reinterpret_cast<uint16_t*>(group)[i] = block.d;
  const int64_t p = column_group_position(i), c = p % kColumnChunk;
  const uint64_t row_bytes = column_group_row_bytes(DType::Q4_0, n_out);
  uint8_t* rows = group + n_out * sizeof(uint16_t) + (p - c) / 2 + c % 32;
  for (int64_t t = 0; t < kColumnGroup; ++t) {
    const int q = t < 16 ? block.qs[t] & 15 : block.qs[t - 16] >> 4;
    rows[static_cast<uint64_t>(t) * row_bytes] |= static_cast<uint8_t>(q << (c < 32 ? 0 : 4));
  }
}

template <class Block>
void build_block_groups(std::span<const MatrixView> parts, int64_t n_out, int64_t n_in,
                        uint8_t* out) {
  const DType type = parts[0].type;
  for (int64_t g = 0; g < n_in / kColumnGroup; ++g) {
    uint8_t* group = out + static_cast<uint64_t>(g) * column_group_bytes(type, n_out);
    int64_t i = 0;  // the output in the stacked order
    for (const MatrixView& m : parts)
      for (int64_t r = 0; r < m.rows; ++r, ++i) {
        const Block& block = reinterpret_cast<const Block*>(m.row(r))[g];
        if constexpr (std::is_same_v<Block, BlockQ8_0>)
          copy_q8_0_block(block, n_out, i, group);
        else
          copy_q4_0_block(block, n_out, i, group);
      }
  }
}

}  // namespace

MatrixView build_column_groups(std::span<const MatrixView> parts, uint8_t* out) {
  if (!column_groups_apply(parts)) fail("column-group copy: the matrices do not fit the layout");
  const int64_t n_out = stacked_outputs(parts), n_in = parts[0].cols;
  const DType type = parts[0].type;
  std::memset(out, 0, column_groups_copy_bytes(parts));  // 4-bit values are or-ed in
  switch (type) {
    case DType::Q8_0:
      build_block_groups<BlockQ8_0>(parts, n_out, n_in, out);
      break;
    case DType::Q4_0:
      build_block_groups<BlockQ4_0>(parts, n_out, n_in, out);
      break;
    case DType::Q2_K:
      build_k_groups<BlockQ2_K>(parts, n_out, n_in, out);
      break;
    case DType::Q3_K:
      build_k_groups<BlockQ3_K>(parts, n_out, n_in, out);
      break;
    case DType::Q4_K:
      build_k_groups<BlockQ4_K>(parts, n_out, n_in, out);
      break;
    case DType::Q5_K:
      build_k_groups<BlockQ5_K>(parts, n_out, n_in, out);
      break;
    default:
      build_k_groups<BlockQ6_K>(parts, n_out, n_in, out);
  }
  return column_groups_view(type, out, n_in, n_out);
}

const uint8_t* column_group_input_row(const MatrixView& copy, int64_t j) {
  return has_block_column_groups(copy.type) ? column_group_row(copy.type, copy.data, copy.cols, j)
                                            : k_column_row(copy.type, copy.data, copy.cols, j);
}

void write_scale_plane(const MatrixView& copy, uint8_t* plane) {
  const auto n = static_cast<uint64_t>(copy.cols);
  if (has_block_column_groups(copy.type)) {
    for (int64_t g = 0; g < copy.rows / kColumnGroup; ++g)
      std::memcpy(plane + static_cast<uint64_t>(g) * n * sizeof(uint16_t),
                  column_group_scales(copy.type, copy.data, copy.cols, g), n * sizeof(uint16_t));
    return;
  }
  const KColumnLayout k = k_column_layout(copy.type);
  for (int64_t g = 0; g < copy.rows / k.group; ++g) {
    const KColumnScales from = k_column_scales(copy.type, copy.data, copy.cols, g);
    const KColumnScales to = k_column_plane_scales(copy.type, plane, copy.cols, g);
    // The plane's pointers, written through (its layout is the copy's without rows).
    const auto put = [&](const void* dst, const void* src, uint64_t bytes) {
      std::memcpy(const_cast<void*>(dst), src, bytes);
    };
    if (g % k.groups() == 0) {  // the super-block's d (and dmin), once
      put(to.d, from.d, n * sizeof(uint16_t));
      if (k.has_min) put(to.dmin, from.dmin, n * sizeof(uint16_t));
    }
    put(to.sc, from.sc, n);
    if (k.has_min) put(to.m, from.m, n);
  }
}

}  // namespace strata
