// The emulated GPU's execution of one kernel launch: every block of the grid in turn, each CUDA
// thread of a block a fiber (emu/fiber.h) on the calling OS thread, switched in a fixed
// round-robin order, so a run's results are the same every time. A thread runs until it meets
// its block at __syncthreads, its warp at a shuffle, or exits; a barrier opens when every thread
// that has not exited is at it, a shuffle when every lane of its mask is.
//
// What a GPU would reject or leave undefined is a fault naming the kernel and the place:
//   - launch shapes (launch_shape_error): more than 1024 threads a block, block z above 64,
//     grid y or z above 65535, grid x above 2^31 - 1, an empty grid or block, dynamic shared
//     memory above 48 KiB (static __shared__ above it is nvcc's compile error);
//   - a __syncthreads reached from different places by the threads of a block (divergent);
//   - a shuffle whose mask names a lane that has exited or does not exist, or whose lanes
//     disagree on the mask; a lane calling with a mask that leaves itself out;
//   - deadlock: threads waiting on each other with none able to go on.
// A faulted block stops where it is; the launch reports the fault, the caller the rest.
//
// Under ThreadSanitizer each CUDA thread is a thread of its own (the fiber switch orders
// nothing): a barrier orders what the block did before it before what it does after it, and
// nothing else does, so shared memory read without a barrier after another thread wrote it is a
// reported race. Blocks are ordered one after another (their shared memory is the same storage).
// Inter-block races and the emulator's own bookkeeping are not reported.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace strata::cuda_emu {

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline constexpr int kWarpSize = 32;
inline constexpr uint64_t kSharedLimit = 48 * 1024;

struct LaunchShape {
  dim3 grid, block;
  uint64_t dynamic_shared = 0;
};

// Empty when a GPU launches this shape; otherwise why it does not.
std::string launch_shape_error(const LaunchShape& shape);

// Runs thread_body as every CUDA thread of every block (the shape must be valid). Returns ""
// or the fault, as "kernel: what, where".
std::string run_grid(const LaunchShape& shape, const char* kernel,
                     const std::function<void()>& thread_body);

// --- what a kernel sees, only while run_grid runs it ---
struct ThreadIndex {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};
const ThreadIndex& this_thread();
// __syncthreads: waits for the block; where it is called (file, line) tells barriers apart.
void sync_threads(const char* file, unsigned line);
// __trap(): the calling thread faults.
[[noreturn]] void trap();
// The value lane (this lane ^ lane_mask) of the warp gave (within groups of `width` lanes),
// once every lane of `mask` has called.
uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask, int width);

}  // namespace strata::cuda_emu
