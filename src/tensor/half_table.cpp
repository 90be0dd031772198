#include "tensor/half_table.h"

#include <vector>

#include "tensor/half.h"

namespace strata {

const float* f16_to_f32_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f16_to_f32(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

}  // namespace strata
