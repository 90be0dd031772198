// kernels_layer.cu compiled as C++ for the emulator (cuda_api.h): the GPU's kernels, run on the
// CPU.
#define STRATA_CUDA_EMU 1
#include "backends/cuda/kernels_layer.cu"
