// Where memory lives. Every buffer the forward pass touches, weights included (MatrixView),
// says which device holds it, so an op can refuse memory its backend cannot address.
#pragma once

#include <cstdint>

namespace strata {

enum class Device : uint8_t {
  Host,         // RAM the CPU addresses (the model file's copy, its mapping, heap, huge pages)
  Accelerator,  // a device's own memory: a GPU's (the CUDA backend), the reference device's
};

inline const char* device_name(Device d) {
  return d == Device::Host ? "host" : "accelerator";
}

// A block of memory on one device, owned by the backend that allocated it.
struct Buffer {
  Device device = Device::Host;
  uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

}  // namespace strata
