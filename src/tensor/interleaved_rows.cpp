#include "tensor/interleaved_rows.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "tensor/unit_quants.h"

namespace strata {

namespace {

// n bytes between a block's place in a group and its place in the plain row, either way.
struct BlockMove {
  uint8_t* group_block;
  uint8_t* plain;
  bool to_group;
  void operator()(uint64_t group_offset, uint64_t plain_offset, size_t n) const {
    if (to_group)
      std::memcpy(group_block + group_offset, plain + plain_offset, n);
    else
      std::memcpy(plain + plain_offset, group_block + group_offset, n);
  }
};

// Q4_K: block (d, dmin, scales[12], qs[128]) of row r, super-block s <-> its places in the group.
// `to_group` copies from the plain block into the group, else back.
void move_q4k_block(uint8_t* group_block, uint8_t* plain, int r, bool to_group) {
  const BlockMove move{group_block, plain, to_group};
  move(2 * r, 0, 2);           // d
  move(32 + 2 * r, 2, 2);      // dmin
  for (int w = 0; w < 3; ++w)  // scale words
    move(64 + 64 * w + 4 * r, 4 + 4 * w, 4);
  for (int k = 0; k < 32; ++k)  // quant chunks
    move(256 + 64 * k + 4 * r, 16 + 4 * k, 4);
}

void interleave_q4k(uint8_t* data, int64_t rows, int64_t cols) {
  const int64_t nb = cols / 256;
  const uint64_t group_bytes = interleaved_group_bytes(DType::Q4_K, cols);
  std::vector<uint8_t> copy(group_bytes);
  for (int64_t g = 0; g < rows / kInterleavedRows; ++g) {
    uint8_t* group = data + static_cast<uint64_t>(g) * group_bytes;
    std::memcpy(copy.data(), group, group_bytes);  // 16 plain rows
    for (int64_t r = 0; r < kInterleavedRows; ++r)
      for (int64_t s = 0; s < nb; ++s)
        move_q4k_block(group + s * kQ4KGroupBlockBytes, copy.data() + (r * nb + s) * 144,
                       static_cast<int>(r), true);
  }
}

// A nibble unit type's block of row r <-> its places in the group's block (layout in the header).
void move_unit_block(uint8_t* group_block, uint8_t* plain, int r, int64_t header, int64_t quants,
                     bool to_group) {
  const BlockMove move{group_block, plain, to_group};
  if (header == 1) move(r, 0, 1);
  for (int64_t w = 0; 2 * w < header && header > 1; ++w) move(32 * w + 2 * r, 2 * w, 2);
  for (int64_t c = 0; c < quants / 4; ++c)
    move(kInterleavedRows * header + 64 * c + 4 * r, header + 4 * c, 4);
}

// Every block of the 16 rows of one group to the group's layout.
void interleave_unit_group(DType type, uint8_t* group, uint8_t* rows, int64_t cols) {
  const DTypeInfo& info = dtype_info(type);
  const int64_t nb = cols / info.block_size, block = info.block_bytes;
  const int64_t header = unit_group_header_bytes(type), quants = block - header;
  for (int64_t r = 0; r < kInterleavedRows; ++r)
    for (int64_t b = 0; b < nb; ++b)
      move_unit_block(group + b * kInterleavedRows * block, rows + (r * nb + b) * block,
                      static_cast<int>(r), header, quants, true);
}

}  // namespace

bool interleavable(DType type) {
  return type == DType::Q4_0 || type == DType::Q8_0 || type == DType::Q4_K ||
         is_nibble_unit_type(type);
}

int64_t unit_group_header_bytes(DType type) {
  const DTypeInfo& info = dtype_info(type);
  const int64_t header = info.block_bytes - info.block_size / 2;
  if (!is_nibble_unit_type(type) || (header != 1 && header % 2 != 0))
    fail("{} blocks do not interleave as nibble units", dtype_name(type));
  return header;
}

void interleave_rows16(DType type, uint8_t* data, int64_t rows, int64_t cols) {
  if (!interleavable(type)) fail("{} rows cannot be interleaved", dtype_name(type));
  if (type == DType::Q4_K) return interleave_q4k(data, rows, cols);
  if (is_nibble_unit_type(type)) {
    const uint64_t group_bytes = interleaved_group_bytes(type, cols);
    std::vector<uint8_t> copy(group_bytes);
    for (int64_t g = 0; g < rows / kInterleavedRows; ++g) {
      uint8_t* group = data + static_cast<uint64_t>(g) * group_bytes;
      std::memcpy(copy.data(), group, group_bytes);  // 16 plain rows
      interleave_unit_group(type, group, copy.data(), cols);
    }
    return;
  }
  const int64_t nb = cols / kQK, qb = interleaved_quant_bytes(type), block = 2 + qb;
  const uint64_t group_bytes = interleaved_group_bytes(type, cols);
  std::vector<uint8_t> copy(group_bytes);
  for (int64_t g = 0; g < rows / kInterleavedRows; ++g) {
    uint8_t* group = data + static_cast<uint64_t>(g) * group_bytes;
    std::memcpy(copy.data(), group, group_bytes);  // 16 plain rows
    uint8_t* quants = group + nb * kInterleavedRows * 2;
    for (int64_t r = 0; r < kInterleavedRows; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = copy.data() + (r * nb + b) * block;
        std::memcpy(group + (b * kInterleavedRows + r) * 2, blk, 2);
        for (int64_t j = 0; j < qb / 4; ++j)
          std::memcpy(quants + ((b * (qb / 4) + j) * kInterleavedRows + r) * 4, blk + 2 + 4 * j, 4);
      }
  }
}

void extract_row16(DType type, const uint8_t* group, int64_t cols, int r, uint8_t* out) {
  if (type == DType::Q4_K) {
    for (int64_t s = 0; s < cols / 256; ++s)
      move_q4k_block(const_cast<uint8_t*>(group) + s * kQ4KGroupBlockBytes, out + s * 144, r,
                     false);
    return;
  }
  if (is_nibble_unit_type(type)) {
    const DTypeInfo& info = dtype_info(type);
    const int64_t block = info.block_bytes, header = unit_group_header_bytes(type);
    for (int64_t b = 0; b < cols / info.block_size; ++b)
      move_unit_block(const_cast<uint8_t*>(group) + b * kInterleavedRows * block, out + b * block,
                      r, header, block - header, false);
    return;
  }
  const int64_t nb = cols / kQK, qb = interleaved_quant_bytes(type), block = 2 + qb;
  const uint8_t* quants = interleaved_quants(group, nb);
  for (int64_t b = 0; b < nb; ++b) {
    std::memcpy(out + b * block, group + (b * kInterleavedRows + r) * 2, 2);
    for (int64_t j = 0; j < qb / 4; ++j)
      std::memcpy(out + b * block + 2 + 4 * j,
                  quants + ((b * (qb / 4) + j) * kInterleavedRows + r) * 4, 4);
  }
}

}  // namespace strata
