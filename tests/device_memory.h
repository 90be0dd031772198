// Test data in a backend's memory: op tests hand every backend its own memory, as the forward
// pass does (uploaded host vectors, read back after the ops), so device backends (the
// reference device, CUDA) run the same checks as the CPU.
#pragma once

#include <span>
#include <vector>

#include "backends/backend.h"

namespace strata {

template <typename T>
class OnDevice {
 public:
  OnDevice(Backend& be, std::span<const T> host) : be_(be), count_(host.size()) {
    buffer_ = be.allocate(std::max<uint64_t>(host.size_bytes(), 1), "test data");
    be.upload(buffer_.data, host.data(), host.size_bytes());
  }
  OnDevice(Backend& be, const std::vector<T>& host) : OnDevice(be, std::span<const T>(host)) {}
  OnDevice(Backend& be, size_t count, T fill) : OnDevice(be, std::vector<T>(count, fill)) {}
  ~OnDevice() { be_.release(buffer_); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

  T* get() const { return reinterpret_cast<T*>(buffer_.data); }
  std::span<const T> span() const { return std::span<const T>(get(), count_); }
  std::vector<T> read() const {
    std::vector<T> host(count_);
    be_.download(host.data(), buffer_.data, count_ * sizeof(T));
    return host;
  }

 private:
  Backend& be_;
  size_t count_;
  Buffer buffer_;
};

// A weight matrix copied to the backend's memory.
struct DeviceMatrix {
  DeviceMatrix(Backend& be, const MatrixView& host)
      : bytes(be, std::span<const uint8_t>(host.data, host.bytes())), view(host) {
    view.data = bytes.get();
    view.device = be.device();
  }
  OnDevice<uint8_t> bytes;
  MatrixView view;
};

}  // namespace strata
