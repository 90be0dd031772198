// The lattice grids of llama.cpp's IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M), as data: each entry is 8 (IQ2, IQ1) or 4 (IQ3) bytes drawn from a few levels, kept as
// the levels' indices, 2 or 3 bits per byte (tensor/iq_grids/*.inc, written from ggml-common.h by
// bench/llamacpp/iq_grids.py). Host and device code read the same codes (iq_grid_code); the
// host's SIMD kernels read the entries expanded to bytes (iq_grid_bytes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/host_device.h"

namespace strata {

enum class IqGrid { IQ2XXS, IQ2XS, IQ2S, IQ1S, IQ3XXS, IQ3S };

namespace iq_grid_codes {
inline constexpr uint16_t kIq2xxs[256] = {
#include "tensor/iq_grids/iq2xxs.inc"
};
inline constexpr uint16_t kIq2xs[512] = {
#include "tensor/iq_grids/iq2xs.inc"
};
inline constexpr uint16_t kIq2s[1024] = {
#include "tensor/iq_grids/iq2s.inc"
};
inline constexpr uint16_t kIq1s[2048] = {
#include "tensor/iq_grids/iq1s.inc"
};
inline constexpr uint16_t kIq3xxs[256] = {
#include "tensor/iq_grids/iq3xxs.inc"
};
inline constexpr uint16_t kIq3s[512] = {
#include "tensor/iq_grids/iq3s.inc"
};
}  // namespace iq_grid_codes

#if defined(__CUDACC__)
// The device's copies (a host constexpr array is not addressable in device code).
namespace iq_grid_device {
static __device__ const uint16_t kIq2xxs[256] = {
#include "tensor/iq_grids/iq2xxs.inc"
};
static __device__ const uint16_t kIq2xs[512] = {
#include "tensor/iq_grids/iq2xs.inc"
};
static __device__ const uint16_t kIq2s[1024] = {
#include "tensor/iq_grids/iq2s.inc"
};
static __device__ const uint16_t kIq1s[2048] = {
#include "tensor/iq_grids/iq1s.inc"
};
static __device__ const uint16_t kIq3xxs[256] = {
#include "tensor/iq_grids/iq3xxs.inc"
};
static __device__ const uint16_t kIq3s[512] = {
#include "tensor/iq_grids/iq3s.inc"
};
}  // namespace iq_grid_device
#endif

#if defined(__CUDA_ARCH__)
#define STRATA_IQ_CODES iq_grid_device
#else
#define STRATA_IQ_CODES iq_grid_codes
#endif

// Entry i of a grid, as its level indices.
STRATA_HD inline uint16_t iq_grid_code(IqGrid g, int i) {
  switch (g) {
    case IqGrid::IQ2XXS:
      return STRATA_IQ_CODES::kIq2xxs[i];
    case IqGrid::IQ2XS:
      return STRATA_IQ_CODES::kIq2xs[i];
    case IqGrid::IQ2S:
      return STRATA_IQ_CODES::kIq2s[i];
    case IqGrid::IQ1S:
      return STRATA_IQ_CODES::kIq1s[i];
    case IqGrid::IQ3XXS:
      return STRATA_IQ_CODES::kIq3xxs[i];
    case IqGrid::IQ3S:
      return STRATA_IQ_CODES::kIq3s[i];
  }
  return 0;
}
#undef STRATA_IQ_CODES

// Byte j of a grid entry as the int8 ggml stores: IQ2 levels 8, 25, 43; IQ1 levels -1, 0, 1;
// IQ3_XXS levels 4, 12, .., 52, 62; IQ3_S levels 1, 3, .., 15.
STRATA_HD constexpr int8_t iq_grid_level(IqGrid g, int code) {
  switch (g) {
    case IqGrid::IQ2XXS:
    case IqGrid::IQ2XS:
    case IqGrid::IQ2S:
      return static_cast<int8_t>(code == 0 ? 8 : code == 1 ? 25 : 43);
    case IqGrid::IQ1S:
      return static_cast<int8_t>(code - 1);
    case IqGrid::IQ3XXS:
      return static_cast<int8_t>(code == 7 ? 62 : 4 + 8 * code);
    case IqGrid::IQ3S:
      return static_cast<int8_t>(2 * code + 1);
  }
  return 0;
}
STRATA_HD constexpr int iq_grid_width(IqGrid g) {
  return g == IqGrid::IQ3XXS || g == IqGrid::IQ3S ? 4 : 8;
}
STRATA_HD inline int8_t iq_grid_value(IqGrid g, int entry, int j) {
  const int bits = iq_grid_width(g) == 4 ? 3 : 2;
  return iq_grid_level(g, (iq_grid_code(g, entry) >> (bits * j)) & ((1 << bits) - 1));
}

// ggml's sign byte of 7 stored sign bits: the eighth makes the count of minus signs even.
STRATA_HD constexpr uint8_t iq_signs7(uint32_t bits7) {
  uint32_t p = bits7 & 127;
  p ^= p >> 4, p ^= p >> 2, p ^= p >> 1;
  return static_cast<uint8_t>((bits7 & 127) | ((p & 1) << 7));
}

#if !defined(__CUDACC__)
// A grid's entries as the bytes ggml stores (little-endian words), for SIMD loads.
template <size_t N>
constexpr std::array<uint64_t, N> iq_grid_expand(IqGrid g, const uint16_t (&codes)[N]) {
  const int bits = iq_grid_width(g) == 4 ? 3 : 2;
  std::array<uint64_t, N> out{};
  for (size_t i = 0; i < N; ++i)
    for (int j = 0; j < iq_grid_width(g); ++j) {
      const int code = (codes[i] >> (bits * j)) & ((1 << bits) - 1);
      out[i] |= uint64_t{static_cast<uint8_t>(iq_grid_level(g, code))} << (8 * j);
    }
  return out;
}
#endif

}  // namespace strata
