#include "backends/cuda/emu/runtime.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
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

// A stream: operations in a list the host appends to and the worker thread takes from. The
// host and the worker share no lock: a node is handed over by a release store its taker
// acquires, and completion by a counter the host acquires. So the worker's view of the host
// reaches only up to the push of the operation it runs, and the host's of the worker only up to
// what its waits saw done: a host that reads a result before synchronising is, to
// ThreadSanitizer, racing with the worker that writes it (a lock taken on every push would
// have ordered it). Wake-ups go through condition variables whose mutexes only the waiting
// side takes, with a 1 ms time-out for a wake-up missed in between.
struct EmuStream {
  struct Node {
    Op op;
    bool stop = false;
    std::atomic<Node*> next{nullptr};
  };

  EmuStream() : head(new Node), tail(head), worker([this] { run(); }) {}
  ~EmuStream() {
    auto* last = new Node;
    last->stop = true;
    append(last);
    worker.join();
    delete head;
  }

  void push(Op op) {
    auto* n = new Node;
    n->op = std::move(op);
    append(n);
  }

  // Waits for every operation queued so far.
  void wait_idle() {
    uint64_t target = 0;
    {
      const std::lock_guard lock(producers);
      target = pushed;
    }
    while (completed.load(std::memory_order_acquire) < target) {
      std::unique_lock lock(done_mutex);
      done.wait_for(lock, std::chrono::milliseconds(1), [&] {
        return completed.load(std::memory_order_relaxed) >= target;
      });
    }
  }

  // wait_idle(), then the stream's sticky error, if any (also this thread's last error).
  cudaError_t drain() {
    wait_idle();
    return sticky_error();
  }

  // The sticky error as the host last saw the stream (after a wait that ordered it).
  cudaError_t sticky_error() {
    const cudaError_t e = sticky.load(std::memory_order_relaxed);
    return e != cudaSuccess ? fail(e, fault) : cudaSuccess;
  }

  // From the worker, in a kernel's operation.
  void set_fault(const std::string& what) {
    fault = what;
    sticky.store(cudaErrorLaunchFailure, std::memory_order_relaxed);
  }

  void append(Node* n) {
    {
      const std::lock_guard lock(producers);  // host threads among themselves
      tail->next.store(n, std::memory_order_release);
      tail = n;
      ++pushed;
    }
    ready.notify_one();
  }

  void run() {
    while (true) {
      Node* next = head->next.load(std::memory_order_acquire);
      if (next == nullptr) {
        std::unique_lock lock(ready_mutex);
        ready.wait_for(lock, std::chrono::milliseconds(1), [&] {
          return head->next.load(std::memory_order_relaxed) != nullptr;
        });
        continue;
      }
      delete head;  // the node run last; `next` is the list's head now
      head = next;
      if (next->stop) return;
      const bool skip = sticky.load(std::memory_order_relaxed) != cudaSuccess && !next->op.always;
      if (!skip) next->op.work();
      next->op = Op{};  // what the operation holds goes now
      completed.fetch_add(1, std::memory_order_release);
      done.notify_all();
    }
  }

  Node* head;  // the worker's: the last node taken (a placeholder before the first)
  std::mutex producers;
  Node* tail;           // the host's, under `producers`
  uint64_t pushed = 0;  // under `producers`
  std::atomic<uint64_t> completed{0};
  std::mutex ready_mutex, done_mutex;  // each taken by its waiting side only
  std::condition_variable ready, done;
  std::atomic<cudaError_t> sticky{cudaSuccess};
  std::string fault;   // written by the worker before `sticky`, read after a wait
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

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;
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
  return s != nullptr ? s->sticky_error() : cudaSuccess;
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
