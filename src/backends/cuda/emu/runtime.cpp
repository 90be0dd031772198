#include "backends/cuda/emu/runtime.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <thread>

namespace strata::cuda_emu {

namespace {

// A stream's operation; `always`: runs after a fault too (event records, so waits end).
struct Op {
  std::function<void()> work;
  bool always = false;
};

// Allocations by start address.
using Ranges = std::map<uintptr_t, uint64_t>;

struct DeviceState {
  std::mutex mutex;
  Ranges device, pinned;
  uint64_t footprint = 0;
  uint64_t streams = 0, events = 0;
};

DeviceState& state() {
  static DeviceState s;
  return s;
}

// Kernels run one at a time across every stream: `__shared__` is static storage.
std::mutex& kernel_mutex() {
  static std::mutex m;
  return m;
}

// The calling thread's last error and its text (CUDA's last error is per host thread).
thread_local cudaError_t last_error = cudaSuccess;
thread_local cudaError_t text_error = cudaSuccess;  // the error last_text tells of
thread_local std::string last_text;

cudaError_t fail(cudaError_t e, std::string text) {
  last_error = text_error = e;
  last_text = std::move(text);
  return e;
}

bool contains(const Ranges& r, const void* p, uint64_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = r.upper_bound(a);
  if (it == r.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

bool overlaps(const Ranges& r, const void* p, uint64_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = r.upper_bound(a + (bytes > 0 ? bytes - 1 : 0));
  if (it == r.begin()) return false;
  --it;
  return it->first + it->second > a;
}

bool is_device(const void* p, uint64_t bytes) {
  DeviceState& s = state();
  const std::lock_guard lock(s.mutex);
  return contains(s.device, p, bytes);
}

bool is_pinned(const void* p, uint64_t bytes) {
  DeviceState& s = state();
  const std::lock_guard lock(s.mutex);
  return contains(s.pinned, p, bytes);
}

bool touches_device(const void* p, uint64_t bytes) {
  DeviceState& s = state();
  const std::lock_guard lock(s.mutex);
  return overlaps(s.device, p, bytes);
}

uint64_t granules(uint64_t bytes) {
  const uint64_t g = kAllocationGranularity;
  return (std::max<uint64_t>(bytes, 1) + g - 1) / g * g;
}

// A heap block of exactly `bytes` (at least 1: AddressSanitizer sees a read past its end),
// recorded in `ranges`.
void* new_block(DeviceState& s, Ranges& ranges, size_t bytes) {
  void* p = ::operator new (std::max<size_t>(bytes, 1), std::align_val_t{256});
  const std::lock_guard lock(s.mutex);
  ranges.emplace(reinterpret_cast<uintptr_t>(p), std::max<size_t>(bytes, 1));
  return p;
}

// Frees a block new_block recorded in `ranges`; false when it is not one.
bool delete_block(DeviceState& s, Ranges& ranges, void* p) {
  {
    const std::lock_guard lock(s.mutex);
    const auto it = ranges.find(reinterpret_cast<uintptr_t>(p));
    if (it == ranges.end()) return false;
    if (&ranges == &s.device) s.footprint -= granules(it->second);
    ranges.erase(it);
  }
  ::operator delete (p, std::align_val_t{256});
  return true;
}

}  // namespace

struct EmuStream {
  EmuStream() : worker([this] { run(); }) {}
  ~EmuStream() {
    {
      const std::lock_guard lock(mutex);
      stop = true;
    }
    ready.notify_all();
    worker.join();
  }

  void push(Op op) {
    {
      const std::lock_guard lock(mutex);
      ops.push_back(std::move(op));
    }
    ready.notify_all();
  }

  // Waits for every operation queued so far.
  void wait_idle() {
    std::unique_lock lock(mutex);
    idle.wait(lock, [&] { return ops.empty() && !busy; });
  }

  // wait_idle(), then the stream's sticky error, if any (also this thread's last error).
  cudaError_t drain() {
    wait_idle();
    const std::lock_guard lock(mutex);
    if (sticky != cudaSuccess) return fail(sticky, fault);
    return cudaSuccess;
  }

  void set_fault(const std::string& what) {
    const std::lock_guard lock(mutex);
    sticky = cudaErrorLaunchFailure;
    fault = what;
  }

  void run() {
    while (true) {
      Op op;
      bool skip = false;
      {
        std::unique_lock lock(mutex);
        ready.wait(lock, [&] { return stop || !ops.empty(); });
        if (ops.empty()) return;
        op = std::move(ops.front());
        ops.pop_front();
        busy = true;
        skip = sticky != cudaSuccess && !op.always;
      }
      if (!skip) op.work();
      {
        const std::lock_guard lock(mutex);
        busy = false;
      }
      idle.notify_all();
    }
  }

  std::mutex mutex;
  std::condition_variable ready, idle;
  std::deque<Op> ops;
  bool busy = false, stop = false;
  cudaError_t sticky = cudaSuccess;
  std::string fault;
  std::thread worker;  // last: it starts when the rest is made
};

struct EmuEvent {
  std::mutex mutex;
  std::condition_variable done;
  uint64_t recorded = 0, completed = 0;
  std::chrono::steady_clock::time_point at;
  EmuStream* stream = nullptr;
};

namespace {

EmuStream* default_stream() {
  static EmuStream s;
  return &s;
}

EmuStream* stream_of(cudaStream_t s) {
  return s != nullptr ? s : default_stream();
}

}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "the emulator has one device, 0");
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "the emulator has one device, 0");
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "%s", "strata CUDA emulator");
  prop->totalGlobalMem = kDeviceBytes;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  prop->warpSize = kWarpSize;
  prop->sharedMemPerBlock = kSharedLimit;
  prop->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "the emulator has one device, 0");
  switch (attr) {
    case cudaDevAttrMemoryClockRate:
      *value = 1000000;  // kHz: with the bus below, 16 GB/s (a figure, not a measurement)
      return cudaSuccess;
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = 64;
      return cudaSuccess;
  }
  return fail(cudaErrorInvalidValue, "an attribute the emulator does not know");
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  DeviceState& s = state();
  const std::lock_guard lock(s.mutex);
  *total = kDeviceBytes;
  *free = kDeviceBytes - s.footprint;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  return last_error;
}

const char* cudaGetErrorString(cudaError_t error) {
  static thread_local std::string text;
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorMemoryAllocation:
      text = "out of memory";
      break;
    case cudaErrorInvalidConfiguration:
      text = "invalid configuration argument";
      break;
    case cudaErrorLaunchFailure:
      text = "unspecified launch failure";
      break;
    case cudaErrorInvalidDevice:
      text = "invalid device ordinal";
      break;
    default:
      text = fmt::format("CUDA error {}", static_cast<int>(error));
  }
  // The emulator's own account of this thread's latest error of this kind.
  if (error == text_error && !last_text.empty()) text += ": " + last_text;
  return text.c_str();
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  DeviceState& s = state();
  {
    const std::lock_guard lock(s.mutex);
    if (s.footprint + granules(bytes) > kDeviceBytes)
      return fail(cudaErrorMemoryAllocation,
                  fmt::format("{} bytes asked, {} of the emulated device's {} free", bytes,
                              kDeviceBytes - s.footprint, kDeviceBytes));
    s.footprint += granules(bytes);
  }
  *ptr = new_block(s, s.device, bytes);
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  DeviceState& s = state();
  if (ptr == nullptr || delete_block(s, s.device, ptr)) return cudaSuccess;
  return fail(cudaErrorInvalidDevicePointer, "cudaFree of a pointer cudaMalloc did not give");
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  DeviceState& s = state();
  *ptr = new_block(s, s.pinned, bytes);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  DeviceState& s = state();
  if (ptr == nullptr || delete_block(s, s.pinned, ptr)) return cudaSuccess;
  return fail(cudaErrorInvalidValue, "cudaFreeHost of a pointer cudaMallocHost did not give");
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (kind == cudaMemcpyDefault)
    kind = is_device(dst, bytes)
               ? (is_device(src, bytes) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
               : (is_device(src, bytes) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_device ? !is_device(dst, bytes) : touches_device(dst, bytes))
    return fail(cudaErrorInvalidValue,
                fmt::format("cudaMemcpyAsync: {} bytes to {}, which is {} device memory", bytes,
                            dst, dst_device ? "not" : "in"));
  if (src_device ? !is_device(src, bytes) : touches_device(src, bytes))
    return fail(cudaErrorInvalidValue,
                fmt::format("cudaMemcpyAsync: {} bytes from {}, which is {} device memory", bytes,
                            src, src_device ? "not" : "in"));
  EmuStream* s = stream_of(stream);
  s->push({[dst, src, bytes] { std::memcpy(dst, src, bytes); }});
  // Into pageable memory the call returns when the bytes are there.
  if (!dst_device && !is_pinned(dst, bytes)) return s->drain();
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  return e != cudaSuccess ? e : default_stream()->drain();
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!is_device(ptr, bytes))
    return fail(cudaErrorInvalidValue,
                fmt::format("cudaMemsetAsync: {} bytes at {}, not device memory", bytes, ptr));
  stream_of(stream)->push({[ptr, value, bytes] { std::memset(ptr, value, bytes); }});
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = new EmuStream;
  DeviceState& s = state();
  const std::lock_guard lock(s.mutex);
  ++s.streams;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle, "the default stream");
  stream->wait_idle();
  delete stream;
  DeviceState& s = state();
  const std::lock_guard lock(s.mutex);
  --s.streams;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return stream_of(stream)->drain();
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new EmuEvent;
  DeviceState& s = state();
  const std::lock_guard lock(s.mutex);
  ++s.events;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "a null event");
  {
    std::unique_lock lock(event->mutex);
    event->done.wait(lock, [&] { return event->completed >= event->recorded; });
  }
  delete event;
  DeviceState& s = state();
  const std::lock_guard lock(s.mutex);
  --s.events;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  EmuStream* s = stream_of(stream);
  uint64_t ticket = 0;
  {
    const std::lock_guard lock(event->mutex);
    ticket = ++event->recorded;
    event->stream = s;
  }
  s->push({[event, ticket] {
             {
               const std::lock_guard lock(event->mutex);
               event->at = std::chrono::steady_clock::now();
               event->completed = ticket;
             }
             event->done.notify_all();
           },
           true});
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  EmuStream* s = nullptr;
  {
    std::unique_lock lock(event->mutex);
    event->done.wait(lock, [&] { return event->completed >= event->recorded; });
    s = event->stream;
  }
  if (s != nullptr) {
    const std::lock_guard lock(s->mutex);
    if (s->sticky != cudaSuccess) return fail(s->sticky, s->fault);
  }
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  const std::lock_guard a(start->mutex);
  const std::lock_guard b(end->mutex);
  if (start->completed == 0 || end->completed == 0 || start->completed < start->recorded ||
      end->completed < end->recorded)
    return fail(cudaErrorNotReady, "an event that has not completed");
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

void enqueue_kernel(cudaStream_t stream, const char* kernel, const LaunchShape& shape,
                    std::function<void()> body) {
  const std::string bad = launch_shape_error(shape);
  if (!bad.empty()) {
    fail(cudaErrorInvalidConfiguration, fmt::format("{}: {}", kernel, bad));
    return;
  }
  EmuStream* s = stream_of(stream);
  s->push({[s, kernel, shape, body = std::move(body)] {
    std::string fault;
    {
      const std::lock_guard lock(kernel_mutex());
      fault = run_grid(shape, kernel, body);
    }
    if (!fault.empty()) s->set_fault(fault);
  }});
}

void enqueue_host(cudaStream_t stream, std::function<void()> work) {
  stream_of(stream)->push({std::move(work)});
}

Census census() {
  DeviceState& s = state();
  const std::lock_guard lock(s.mutex);
  return Census{s.device.size(), s.footprint, s.pinned.size(), s.streams, s.events};
}

}  // namespace strata::cuda_emu
