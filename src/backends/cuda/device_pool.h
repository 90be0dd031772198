// Device memory for the CUDA backend: buffers cut from a few large chunks taken from the driver,
// so the budget counts what the driver really gives. The driver hands out memory in 2 MiB
// granules: a cudaMalloc per tensor counted by the bytes asked for let a model of many small
// tensors take far more than --vram-budget (on the emulator, which counts as the driver does,
// the shipped model's session under a 160 MiB budget took 230 MiB: tests/test_cuda_emu.cpp).
//
// With an explicit budget the pool takes it whole when made (rounded down to the granule): the
// process then holds exactly its budget, as cudaMemGetInfo and nvidia-smi show it, never more.
// Without one it grows a chunk per request that does not fit (the request rounded up to the
// granule) and gives a chunk back when it empties. Buffers are aligned to 256 bytes, placed
// first-fit, and free neighbours merge. Plain host code: the driver's calls come in as
// functions, so tests and both builds (GPU, emulator) use the same pool.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

namespace strata {

inline constexpr uint64_t kDeviceGranule = uint64_t{2} << 20;
inline constexpr uint64_t kDeviceAlignment = 256;

struct DeviceDriver {
  std::function<uint8_t*(uint64_t bytes)> reserve;  // a chunk; null when the driver refuses
  std::function<void(uint8_t*)> free;
};

class DevicePool {
 public:
  // `limit`: the most the pool may take from the driver; `whole`: take it all now.
  // `host_memory`: the chunks are host memory (the emulator), whose free ranges are poisoned
  // for AddressSanitizer so a kernel reading past its buffer is still caught.
  DevicePool(uint64_t limit, bool whole, DeviceDriver driver, bool host_memory);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // A buffer of `bytes`, or null when neither a free range nor the limit can give one.
  uint8_t* allocate(uint64_t bytes);
  void release(uint8_t* p);  // one allocate() gave; null is ignored

  uint64_t in_use() const { return in_use_; }  // the buffers, with their alignment
  uint64_t held() const { return held_; }      // the chunks: what the driver gave
  uint64_t limit() const { return limit_; }
  uint64_t largest_free() const;  // the largest buffer allocate could give now

 private:
  struct Chunk {
    uint8_t* base = nullptr;
    uint64_t bytes = 0;
    bool keep = false;                  // the whole-budget chunk stays until the end
    std::map<uint64_t, uint64_t> free;  // offset -> size, merged
  };
  uint8_t* take(Chunk& c, uint64_t bytes);
  void poison(uint8_t* p, uint64_t bytes, bool on) const;

  uint64_t limit_;
  DeviceDriver driver_;
  [[maybe_unused]] bool host_memory_;  // read only under AddressSanitizer
  std::vector<Chunk> chunks_;
  std::unordered_map<uint8_t*, uint64_t> live_;  // buffer -> its aligned size
  uint64_t in_use_ = 0, held_ = 0;
};

}  // namespace strata
