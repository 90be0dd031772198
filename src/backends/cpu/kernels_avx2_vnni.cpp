// The AVX2 kernels again, with int8 products on AVX-512 VNNI (vpdpbusd on 256-bit registers).
// Compiled with -mavx2 -mfma -mf16c -mavx512f -mavx512vl -mavx512bw -mavx512vnni; see kernels_avx2.cpp.
#define STRATA_KERNELS_VNNI 1
#include "backends/cpu/kernels_avx2.cpp"
