// The CUDA language as strata's kernels use it, for compiling them as plain C++ against the
// emulator (cuda_api.h includes this when STRATA_CUDA_EMU is defined): the qualifiers as
// nothing (__shared__ as static storage: blocks run one at a time), the built-in indices of the
// running CUDA thread, __syncthreads and the warp shuffles (emu/grid.h), integer atomics, the
// f16 storage type and the load and bit-cast intrinsics; launches go through STRATA_LAUNCH
// (launch.h) to launch() below. Only what the kernels use is here: a kernel that needs more
// fails to compile in the emulated build, and the missing piece goes here.
#pragma once

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>

#include "backends/cuda/emu/blas.h"
#include "backends/cuda/emu/grid.h"
#include "backends/cuda/emu/runtime.h"
#include "tensor/half.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define threadIdx (::strata::cuda_emu::this_thread().thread)
#define blockIdx (::strata::cuda_emu::this_thread().block)
#define blockDim (::strata::cuda_emu::this_thread().block_dim)
#define gridDim (::strata::cuda_emu::this_thread().grid_dim)

namespace strata::cuda_emu {

struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}

struct __half {
  uint16_t bits;
};
inline __half __float2half_rn(float f) {
  return __half{f32_to_f16(f)};
}

template <class T>
inline T __ldg(const T* p) {
  return *p;
}

inline unsigned __float_as_uint(float f) {
  return std::bit_cast<unsigned>(f);
}
inline float __uint_as_float(unsigned u) {
  return std::bit_cast<float>(u);
}

// The caller's place by the builtins (clang 14 has no std::source_location).
inline void __syncthreads(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  sync_threads(file, line);
}

template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = kWarpSize) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = shuffle_xor(mask, bits, lane_mask, width);
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

template <class T>
inline T atomicAdd(T* p, T v) {
  static_assert(std::is_integral_v<T>, "the emulator's atomics are on integers");
  return std::atomic_ref<T>(*p).fetch_add(v);
}

template <class T>
inline T atomicMin(T* p, T v) {
  static_assert(std::is_integral_v<T>, "the emulator's atomics are on integers");
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

// A kernel's own assertion: the block stops and the launch faults (on a GPU, the context).
[[noreturn]] inline void __trap() {
  trap();
}

// kernel<<<grid, block, shared, stream>>>(args...): the arguments converted to the kernel's
// parameter types and copied now, as a launch does; every thread calls the kernel with them.
template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, uint64_t shared,
            cudaStream_t stream, A&&... args) {
  auto bound = std::make_shared<const std::tuple<std::decay_t<P>...>>(std::forward<A>(args)...);
  enqueue_kernel(stream, name, LaunchShape{grid, block, shared},
                 [kernel, bound] { std::apply(kernel, *bound); });
}

}  // namespace strata::cuda_emu
