// cuBLAS as the CUDA backend calls it, opened when a backend is made: linked, its 570 MB
// (libcublasLt) would be mapped and relocated by every run, the CPU's included (a --ram-budget
// run under 80 MiB was killed). The emulator's build (STRATA_CUDA_EMU) takes emu/blas's two
// calls directly. Included by cuda_backend.cpp only, in the namespace of its build.
#pragma once

#include "backends/cuda/cuda_api.h"
#include "core/error.h"

#if !defined(STRATA_CUDA_EMU)
#include <dlfcn.h>
#endif

namespace strata::STRATA_CUDA_NS {

struct Cublas {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSgemm_v2) sgemm;
  // The C API's cublasGemmEx (C++ also sees an overload), by its signature.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t);
};

inline const Cublas& cublas() {
#if defined(STRATA_CUDA_EMU)
  static const Cublas api{&cublasCreate_v2,       &cublasDestroy_v2, &cublasSetStream_v2,
                          &cublasSetWorkspace_v2, &cublasSgemm_v2,   &cublasGemmEx};
#else
  static const Cublas api = [] {
    void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) fail("the CUDA backend needs cuBLAS 13 (libcublas.so.13): {}", dlerror());
    auto symbol = [&](const char* name) {
      void* f = dlsym(lib, name);
      if (f == nullptr) fail("libcublas.so.13 has no {}", name);
      return f;
    };
    Cublas a;
    a.create = reinterpret_cast<decltype(a.create)>(symbol("cublasCreate_v2"));
    a.destroy = reinterpret_cast<decltype(a.destroy)>(symbol("cublasDestroy_v2"));
    a.set_stream = reinterpret_cast<decltype(a.set_stream)>(symbol("cublasSetStream_v2"));
    a.set_workspace = reinterpret_cast<decltype(a.set_workspace)>(symbol("cublasSetWorkspace_v2"));
    a.sgemm = reinterpret_cast<decltype(a.sgemm)>(symbol("cublasSgemm_v2"));
    a.gemm_ex = reinterpret_cast<decltype(a.gemm_ex)>(symbol("cublasGemmEx"));
    return a;
  }();
#endif
  return api;
}

}  // namespace strata::STRATA_CUDA_NS
