// Batched products of Q8_0/Q4_0 weights with Q8_0 activations on Intel AMX (tile int8 matrix
// multiply), for prompts: 16 weight rows x up to 16 tokens x one 32-value block per tile
// instruction. Each block's int32 dot product is exact; it is then scaled and summed in block
// order exactly as the scalar reference kernel does (multiply, then add; no fused multiply-add),
// so the results equal scalar_kernels().dot_q8_0 / dot_q4_0 bit for bit. Interleaved rows
// (Layout::Interleaved16) are read as they lie; their ranges must start and end at groups of 16.
#pragma once

#include <cstdint>
#include <span>

#include "backends/cpu/kernels.h"
#include "tensor/matrix.h"

namespace strata {

// True when the CPU has AMX-INT8 and the kernel lets this process use the tile registers
// (Linux asks each process to request them). STRATA_CPU=... other than "amx"/unset disables it.
bool amx_available();

// y[t * y_stride + r] = W[r] . x[t] for rows [row_begin, row_end) and every token t (at most
// kAmxMaxTokens).
inline constexpr int64_t kAmxMaxTokens = 32;
void amx_matmat_rows(const MatrixView& w, int64_t row_begin, int64_t row_end,
                     std::span<const Q8Activation> x, float* y, int64_t y_stride);

// `strata bench`'s compute limit on AMX: `iterations` rounds of four independent int8 tile
// products; returns the multiply-adds performed. Only after amx_available().
uint64_t amx_int8_peak_loop(int64_t iterations);

}  // namespace strata
