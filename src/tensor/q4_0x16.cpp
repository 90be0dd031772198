#include "tensor/q4_0x16.h"

#include <cstring>
#include <vector>

namespace strata {

void interleave_q4_0x16(uint8_t* data, int64_t rows, int64_t cols) {
  const int64_t nb = cols / kQK;
  const uint64_t group_bytes = q4_0x16_group_bytes(cols);
  std::vector<uint8_t> copy(group_bytes);
  for (int64_t g = 0; g < rows / kQ4x16Rows; ++g) {
    uint8_t* group = data + static_cast<uint64_t>(g) * group_bytes;
    std::memcpy(copy.data(), group, group_bytes);
    const auto* src = reinterpret_cast<const BlockQ4_0*>(copy.data());  // 16 plain rows
    uint8_t* quants = group + nb * kQ4x16Rows * 2;
    for (int64_t r = 0; r < kQ4x16Rows; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ4_0& blk = src[r * nb + b];
        std::memcpy(group + (b * kQ4x16Rows + r) * 2, &blk.d, 2);
        for (int j = 0; j < 4; ++j)
          std::memcpy(quants + ((b * 4 + j) * kQ4x16Rows + r) * 4, blk.qs + 4 * j, 4);
      }
  }
}

void extract_q4_0x16_row(const uint8_t* group, int64_t cols, int r, BlockQ4_0* out) {
  const int64_t nb = cols / kQK;
  const uint8_t* quants = q4_0x16_quants(group, nb);
  for (int64_t b = 0; b < nb; ++b) {
    std::memcpy(&out[b].d, group + (b * kQ4x16Rows + r) * 2, 2);
    for (int j = 0; j < 4; ++j)
      std::memcpy(out[b].qs + 4 * j, quants + ((b * 4 + j) * kQ4x16Rows + r) * 4, 4);
  }
}

}  // namespace strata
