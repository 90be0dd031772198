// Marks functions that both the CPU and CUDA code compile: the per-element math a GPU kernel
// must share with the CPU reference (block decoding, reduction order) lives in such functions,
// so the CPU tests check it and a device run checks only the rest.
#pragma once

#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__
#else
#define STRATA_HD
#endif
