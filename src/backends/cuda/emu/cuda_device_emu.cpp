// cuda_device.cpp built against the emulator (cuda_api.h): the emulated GPU's discovery.
#define STRATA_CUDA_EMU 1
#include "backends/cuda/cuda_device.cpp"
