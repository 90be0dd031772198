// The CUDA API as strata's CUDA sources see it, in one place: the real runtime, f16 and cuBLAS
// headers, or with STRATA_CUDA_EMU the emulator's (emu/cuda_emu.h: the same names in namespace
// strata::cuda_emu, the kernels compiled as C++ and run on the CPU). The same sources build
// both: STRATA_CUDA_NS is the namespace they define their code in (strata::cuda for the GPU,
// strata::cuda_emu for the emulator, so both can be in one program), and STRATA_LAUNCH
// launches a kernel on a stream (kernel<<<grid, block, 0, stream>>>(args...) under nvcc).
#pragma once

#if defined(STRATA_CUDA_EMU)
#include "backends/cuda/emu/cuda_emu.h"
#define STRATA_CUDA_NS cuda_emu
#define STRATA_LAUNCH(kernel, grid, block, stream, ...) \
  ::strata::cuda_emu::launch(#kernel, kernel, grid, block, 0, stream, __VA_ARGS__)
#else
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#define STRATA_CUDA_NS cuda
#define STRATA_LAUNCH(kernel, grid, block, stream, ...) \
  kernel<<<grid, block, 0, stream>>>(__VA_ARGS__)
#endif
