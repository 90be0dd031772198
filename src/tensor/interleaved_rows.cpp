#include "tensor/interleaved_rows.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace strata {

void interleave_rows16(DType type, uint8_t* data, int64_t rows, int64_t cols) {
  if (!interleavable(type)) fail("{} rows cannot be interleaved", dtype_name(type));
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
