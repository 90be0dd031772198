// The CUDA emulator itself (backends/cuda/emu): kernels written here in CUDA's language, run on
// the CPU. What a GPU guarantees works (barriers order shared memory, shuffles exchange within a
// warp, each thread sees its indices) and what a GPU rejects or leaves undefined is a fault that
// names the place (divergent barriers, shuffles naming exited lanes, deadlock, launch shapes),
// sticky like a GPU's; memory is counted as the driver counts it; copies from pageable memory
// read it when they run. The backend's own contracts on it: uploads may reuse their bytes at
// once, a failed construction leaves nothing behind, STRATA_CUDA_SYNC=1 names a kernel's fault
// at its launch.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <random>
#include <vector>

#include "backends/cuda/block_math.h"
#include "backends/cuda/cuda_backend.h"
#include "core/error.h"
#include "device_memory.h"
#include "runtime/session.h"
#include "test_helpers.h"

#define STRATA_CUDA_EMU 1
#include "backends/cuda/launch.h"

namespace strata::cuda_emu {
namespace {

__global__ void reverse_kernel(const int* in, int* out) {
  __shared__ int tile[256];
  const int base = static_cast<int>(blockIdx.x * blockDim.x);
  tile[threadIdx.x] = in[base + static_cast<int>(threadIdx.x)];
  __syncthreads();
  out[base + static_cast<int>(threadIdx.x)] = tile[blockDim.x - 1 - threadIdx.x];
}

__global__ void warp_sum_kernel(const float* in, float* out) {
  float v = in[threadIdx.x];
  for (int step = 16; step > 0; step /= 2) v += __shfl_xor_sync(0xffffffffu, v, step);
  out[threadIdx.x] = v;
}

__global__ void divergent_kernel(int* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
    out[0] = 1;
  } else {
    __syncthreads();
    out[1] = 1;
  }
}

// Warp w waits at the loop's barrier w + 1 times: the warps part ways at the second round.
__global__ void per_warp_loop_kernel(int* out) {
  const unsigned warp = threadIdx.x / 32;
  for (unsigned i = 0; i <= warp; ++i) __syncthreads();
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void exited_lane_kernel(float* out) {
  if (threadIdx.x == 3) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void deadlock_kernel(float* out) {
  // Lane 0 of each warp waits at a barrier while its warp-mates wait for it at a shuffle.
  if (threadIdx.x % 32 == 0)
    __syncthreads();
  else
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 2);
}

__global__ void count_kernel(int* counter) {
  atomicAdd(counter, 1);
}

template <class T>
T* device_array(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(p, 0, n * sizeof(T), nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);  // before the tests' own streams
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> read(const T* p, size_t n, cudaStream_t s = nullptr) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost, s), cudaSuccess);
  return host;
}

// A stream of its own per test: a fault is sticky on its stream.
struct Stream {
  Stream() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(s); }
  cudaStream_t s = nullptr;
};

// The stream's fault, taken from this thread's last error too (as a GPU's, it stays there
// until taken, and the next test's launches would report it).
std::string fault_of(cudaStream_t s) {
  const cudaError_t e = cudaStreamSynchronize(s);
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  const std::string text = cudaGetErrorString(e);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  return text;
}

TEST(CudaEmu, BarriersOrderSharedMemoryAndEachThreadSeesItsIndices) {
  Stream st;
  std::vector<int> in(1024);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i) * 7;
  int* din = device_array<int>(in.size());
  int* dout = device_array<int>(in.size());
  ASSERT_EQ(cudaMemcpyAsync(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice, st.s),
            cudaSuccess);
  STRATA_LAUNCH(reverse_kernel, 4, 256, st.s, din, dout);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  const std::vector<int> out = read(dout, in.size(), st.s);
  for (int b = 0; b < 4; ++b)
    for (int t = 0; t < 256; ++t) ASSERT_EQ(out[b * 256 + t], in[b * 256 + 255 - t]);
  cudaFree(din);
  cudaFree(dout);
}

TEST(CudaEmu, WarpShufflesAddAsTheHostButterflyDoes) {
  Stream st;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> in(64);
  for (float& v : in) v = d(rng);
  float* din = device_array<float>(64);
  float* dout = device_array<float>(64);
  cudaMemcpyAsync(din, in.data(), 64 * 4, cudaMemcpyHostToDevice, st.s);
  STRATA_LAUNCH(warp_sum_kernel, 1, 64, st.s, din, dout);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  const std::vector<float> out = read(dout, 64, st.s);
  for (int w = 0; w < 2; ++w) {
    std::vector<float> lanes(in.begin() + w * 32, in.begin() + w * 32 + 32);
    const float want = cuda_math::lane_tree_sum(lanes.data());
    for (int l = 0; l < 32; ++l) EXPECT_EQ(out[static_cast<size_t>(w * 32 + l)], want);
  }
  cudaFree(din);
  cudaFree(dout);
}

// Launches kernel(out) as one block of `threads` on a stream of its own; the fault it ends in.
template <class T>
std::string fault_of_block(void (*kernel)(T*), unsigned threads) {
  Stream st;
  T* out = device_array<T>(threads);
  STRATA_LAUNCH(kernel, 1, threads, st.s, out);
  const std::string f = fault_of(st.s);
  cudaFree(out);
  return f;
}

TEST(CudaEmu, ADivergentBarrierIsAFaultNamingBothPlaces) {
  const std::string f = fault_of_block(divergent_kernel, 64);
  EXPECT_NE(f.find("divergent __syncthreads"), std::string::npos) << f;
  EXPECT_NE(f.find("thread (0,0,0) of block (0,0,0) waits at test_cuda_emu.cpp:"),
            std::string::npos)
      << f;
  EXPECT_NE(f.find("thread (32,0,0) of block (0,0,0) at test_cuda_emu.cpp:"), std::string::npos)
      << f;
}

TEST(CudaEmu, ABarrierInsideAPerWarpLoopIsDivergent) {
  const std::string f = fault_of_block(per_warp_loop_kernel, 128);
  EXPECT_NE(f.find("divergent __syncthreads"), std::string::npos) << f;
}

TEST(CudaEmu, AShuffleWhoseMaskNamesAnExitedLaneIsAFault) {
  const std::string f = fault_of_block(exited_lane_kernel, 32);
  EXPECT_NE(f.find("names lane 3, which has exited"), std::string::npos) << f;
}

TEST(CudaEmu, ThreadsWaitingOnEachOtherAreADeadlockFault) {
  const std::string f = fault_of_block(deadlock_kernel, 64);
  EXPECT_NE(f.find("deadlock"), std::string::npos) << f;
}

TEST(CudaEmu, AFaultIsStickyAndLaterWorkOnItsStreamIsSkipped) {
  Stream st;
  int* out = device_array<int>(128);
  STRATA_LAUNCH(per_warp_loop_kernel, 1, 128, st.s, out);
  int* counter = device_array<int>(1);
  STRATA_LAUNCH(count_kernel, 1, 32, st.s, counter);
  EXPECT_EQ(cudaStreamSynchronize(st.s), cudaErrorLaunchFailure);
  const std::string f = fault_of(st.s);  // named by the kernel that faulted
  EXPECT_NE(f.find("per_warp_loop_kernel"), std::string::npos) << f;
  Stream other;  // another stream is unaffected
  STRATA_LAUNCH(count_kernel, 2, 32, other.s, counter);
  ASSERT_EQ(cudaStreamSynchronize(other.s), cudaSuccess);
  EXPECT_EQ(read(counter, 1, other.s)[0], 64);
  cudaFree(out);
  cudaFree(counter);
}

TEST(CudaEmu, LaunchShapesAGpuRejectsFailAtTheLaunch) {
  Stream st;
  int* counter = device_array<int>(1);
  const struct {
    dim3 grid, block;
    const char* why;
  } bad[] = {{dim3(1), dim3(1025), "1025 threads"},
             {dim3(1), dim3(1, 1, 65), "block z"},
             {dim3(1, 65536), dim3(32), "grid y"},
             {dim3(0), dim3(32), "empty"}};
  for (const auto& b : bad) {
    STRATA_LAUNCH(count_kernel, b.grid, b.block, st.s, counter);
    const cudaError_t e = cudaGetLastError();
    EXPECT_EQ(e, cudaErrorInvalidConfiguration) << b.why;
    EXPECT_NE(std::string(cudaGetErrorString(e)).find(b.why), std::string::npos)
        << cudaGetErrorString(e);
  }
  EXPECT_NE(launch_shape_error({dim3(1), dim3(32), 49 * 1024}), "");
  EXPECT_EQ(launch_shape_error({dim3(1), dim3(32), 48 * 1024}), "");
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  EXPECT_EQ(read(counter, 1, st.s)[0], 0) << "a rejected launch ran";
  cudaFree(counter);
}

TEST(CudaEmu, DeviceMemoryIsCountedAtTheDriversGranularityAndChecked) {
  const Census before = census();
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1), cudaSuccess);
  EXPECT_EQ(census().device_footprint - before.device_footprint, kAllocationGranularity);
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  EXPECT_EQ(total - free, census().device_footprint);
  // A host pointer where device memory belongs is an error, not a silent copy.
  std::vector<char> host(16), other(16);
  EXPECT_EQ(cudaMemcpyAsync(other.data(), host.data(), 16, cudaMemcpyHostToDevice, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(host.data(), 0, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevicePointer);  // and taken
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaFree(p);
  EXPECT_EQ(census().device_footprint, before.device_footprint);
}

TEST(CudaEmu, CopiesFromPageableMemoryReadItWhenTheyRun) {
  Stream st;
  std::mutex m;
  std::condition_variable cv;
  bool go = false;
  enqueue_host(st.s, [&] {  // holds the stream until the host has changed its bytes
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return go; });
  });
  std::vector<int> host(4, 1);
  int* d = device_array<int>(4);
  cudaMemcpyAsync(d, host.data(), 16, cudaMemcpyHostToDevice, st.s);
  {
    const std::lock_guard lock(m);
    host.assign(4, 2);  // after the call returned, before the copy ran
    go = true;
  }
  cv.notify_all();
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  EXPECT_EQ(read(d, 4, st.s), std::vector<int>(4, 2));
  cudaFree(d);
}

TEST(CudaEmu, TheBackendsUploadsMayReuseTheirBytesAtOnce) {
  auto be = make_cuda_emu_backend({});
  // A slow op first, so the upload's copy runs well after upload() returned.
  std::vector<float> x(64 * 1024, 1.0f);
  const OnDevice<float> dx(*be, x), dy(*be, x.size(), 0.0f);
  for (int i = 0; i < 20; ++i) be->relu(dy.get(), static_cast<int64_t>(x.size()));
  std::vector<float> host(4096, 3.0f);
  const OnDevice<float> up(*be, host.size(), 0.0f);
  be->upload(up.get(), host.data(), host.size() * sizeof(float));
  host.assign(host.size(), -1.0f);
  EXPECT_EQ(up.read(), std::vector<float>(4096, 3.0f));
}

// The budget is a hard limit as the driver counts memory (2 MiB granules), not as the bytes
// asked for: the shipped model's session under 160 MiB. (With a cudaMalloc per tensor it took
// 230 MiB.)
TEST(CudaEmu, ASessionHoldsItsBudgetAsTheDriverCountsIt) {
  auto m = Model::load(strata::testing::source_file("models/strata-tiny.gguf"), false);
  const uint64_t budget = uint64_t{160} << 20;
  const Census before = census();
  CudaOptions o;
  o.budget = budget;
  auto be = make_cuda_emu_backend(o);
  uint64_t footprint = 0;
  {
    Session s(*m, 64, *be, {});
    s.eval(std::vector<int32_t>{1, 5, 200, 17});
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    footprint = (total - free) - before.device_footprint;
  }
  EXPECT_GT(footprint, uint64_t{100} << 20);
  EXPECT_LE(footprint, budget);
}

TEST(CudaEmu, ABackendThatCannotBeMadeLeavesNothingBehind) {
  const Census before = census();
  CudaOptions o;
  o.budget = 1 << 20;  // below the backend's own scratch
  try {
    make_cuda_emu_backend(o);
    FAIL() << "a backend was made under a budget below its scratch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
  const Census after = census();
  EXPECT_EQ(after.device_allocations, before.device_allocations);
  EXPECT_EQ(after.pinned_allocations, before.pinned_allocations);
  EXPECT_EQ(after.streams, before.streams);
  EXPECT_EQ(after.events, before.events);
}

TEST(CudaEmu, SyncModeNamesAKernelsFaultAtItsLaunch) {
  Stream st;
  int* out = device_array<int>(2);
  ::unsetenv("STRATA_CUDA_SYNC");
  STRATA_LAUNCH(divergent_kernel, 1, 64, st.s, out);
  EXPECT_NO_THROW(check_launch("the planted op", st.s)) << "a launch that succeeded";
  EXPECT_NE(fault_of(st.s), "");  // found later, at the synchronisation
  Stream second;
  ::setenv("STRATA_CUDA_SYNC", "1", 1);
  STRATA_LAUNCH(divergent_kernel, 1, 64, second.s, out);
  try {
    check_launch("the planted op", second.s);
    ADD_FAILURE() << "the fault was not reported at its launch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the planted op"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("divergent"), std::string::npos) << e.what();
  }
  ::unsetenv("STRATA_CUDA_SYNC");
  cudaFree(out);
}

// A weight matrix of `rows` rows of `cols` ones in F32, on the backend.
struct Ones {
  Ones(Backend& be, int64_t rows, int64_t cols)
      : host(static_cast<size_t>(rows * cols), 1.0f),
        matrix(be, MatrixView{DType::F32, reinterpret_cast<const uint8_t*>(host.data()), cols, rows,
                              static_cast<uint64_t>(cols) * 4}) {}
  std::vector<float> host;
  DeviceMatrix matrix;
};

TEST(CudaEmu, TheBackendsGatherChecksTheActivationsWidth) {
  auto be = make_cuda_emu_backend({});
  const Ones w(*be, 4, 32);
  const OnDevice<float> x(*be, 16, 1.0f), y(*be, 4, 0.0f);
  const OnDevice<int32_t> ids(*be, std::vector<int32_t>{0, 2});
  auto in = be->make_prepared(1);
  be->prepare(*in, x.get(), 16, 1, {DType::F32});
  const RowsJob job{&w.matrix.view, y.get(), 4};
  try {
    be->gather(std::span(&job, 1), ids.span(), *in, nullptr, 0);
    FAIL() << "a gather over rows of 32 values with activations of 16 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rows of 32 values, activations of 16"), std::string::npos)
        << e.what();
  }
}

TEST(CudaEmu, TheBackendsAxpyTrapsOnMoreThanTwoAscendingRuns) {
  auto be = make_cuda_emu_backend({});
  const Ones w(*be, 8, 32);
  const OnDevice<int32_t> ids(*be, std::vector<int32_t>{0, 5, 1, 6, 2});  // three runs
  const OnDevice<float> c(*be, 5, 1.0f), out(*be, 32, 0.0f);
  ::setenv("STRATA_CUDA_SYNC", "1", 1);
  try {
    be->axpy(w.matrix.view, ids.span(), c.get(), 5, 1, out.get(), 32, {}, 8);
    ADD_FAILURE() << "an axpy over three runs ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("__trap()"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("axpy"), std::string::npos) << e.what();
  }
  ::unsetenv("STRATA_CUDA_SYNC");
}

}  // namespace
}  // namespace strata::cuda_emu
