// cuda_backend.cpp built against the emulator (cuda_api.h): the real CUDA backend's host code,
// as the "cuda-emu" backend.
#define STRATA_CUDA_EMU 1
#include "backends/cuda/cuda_backend.cpp"
