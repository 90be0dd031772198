// All 65,536 f16 values as f32, so SIMD kernels turn a block's f16 scale into f32 with one
// load instead of a conversion on the shuffle port.
#pragma once

namespace strata {

const float* f16_to_f32_table();

}  // namespace strata
