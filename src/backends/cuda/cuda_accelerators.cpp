// The CUDA backend behind the accelerator seam (backends/accelerator.h): the GPU's provider over
// cuda_backend.h's entry points (cuda_none.cpp answers them in builds without nvcc) and the
// emulated GPU's. The weight types both read are block_math.h's table.
#include "backends/accelerator.h"
#include "backends/cuda/block_math.h"
#include "backends/cuda/cuda_backend.h"
#include "core/error.h"

namespace strata {

namespace {

AcceleratorInfo accelerator_info(const CudaDeviceInfo& d) {
  return {d.name, d.total_bytes, d.free_bytes, d.peak_bytes_per_s};
}

CudaOptions cuda_options(const AcceleratorOptions& o) {
  CudaOptions c;
  c.device = o.device;
  c.budget = o.budget;
  return c;
}

// The GPU, or the emulated one: the same backend built twice, the same kernels' types.
class CudaAccelerator final : public AcceleratorProvider {
 public:
  explicit CudaAccelerator(bool emulated) : emulated_(emulated) {}
  const char* name() const override { return emulated_ ? "cuda-emu" : "cuda"; }
  int device_count() const override { return emulated_ ? 1 : cuda_device_count(); }
  std::string unavailable_reason() const override {
    return emulated_ ? std::string() : cuda_unavailable_reason();
  }
  AcceleratorInfo info(int device) const override {
    return accelerator_info(emulated_ ? cuda_emu_device_info() : cuda_device_info(device));
  }
  std::unique_ptr<Backend> make(const AcceleratorOptions& o) const override {
    return emulated_ ? make_cuda_emu_backend(cuda_options(o)) : make_cuda_backend(cuda_options(o));
  }
  uint64_t overhead_bytes() const override { return cuda_backend_overhead_bytes(); }
  double read_bandwidth(Backend& backend) const override {
    if (emulated_) fail("the emulated GPU's memory is the host's: its bandwidth is not a GPU's");
    return cuda_read_bandwidth(backend);
  }
  bool reads_weights(DType type) const override { return cuda_math::cuda_weight_type(type); }
  // attention_kernel soft-caps (cuda_math::attention_score) and takes sinks.
  bool supports(LayerOp) const override { return true; }

 private:
  bool emulated_;
};

}  // namespace

const AcceleratorProvider& cuda_accelerator() {
  static const CudaAccelerator provider(false);
  return provider;
}

const AcceleratorProvider& cuda_emu_accelerator() {
  static const CudaAccelerator provider(true);
  return provider;
}

}  // namespace strata
