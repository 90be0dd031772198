#include "backends/cuda/emu/grid.h"

#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cuda/emu/fiber.h"
#include "backends/cuda/emu/sanitizers.h"

namespace strata::cuda_emu {

namespace {

// Fiber stacks: the kernels' frames are small; the sanitizers' frames are not.
#if defined(STRATA_EMU_ASAN) || defined(STRATA_EMU_TSAN)
constexpr size_t kStackBytes = 256 * 1024;
#else
constexpr size_t kStackBytes = 64 * 1024;
#endif
constexpr int kMaxThreads = 1024;

enum class Wait : uint8_t { Ready, Barrier, Shuffle, Exited, Faulted };

struct Runner;

// One CUDA thread of the block being run. The fields a thread and the scheduler both change
// are relaxed atomics: the emulator's bookkeeping orders nothing for ThreadSanitizer (only
// tsan_release/acquire do) and is never reported.
struct Lane {
  Runner* runner = nullptr;
  Fiber* fiber = nullptr;
  ThreadIndex index;  // set before the block starts (ordered by block_start)
  int linear = 0;
  std::atomic<Wait> wait{Wait::Ready};
  std::atomic<const char*> file{nullptr};  // the barrier it waits at
  std::atomic<uint32_t> line{0};
  std::atomic<uint32_t> rounds{0};  // barriers passed
  std::atomic<uint32_t> mask{0};    // the shuffle it waits at
  std::atomic<int32_t> source{0};
  std::atomic<uint64_t> value{0}, result{0};
};

// What one OS thread needs to run blocks: fibers and lanes, made once, reused by every launch.
struct Runner {
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::unique_ptr<Lane[]> lanes = std::make_unique<Lane[]>(kMaxThreads);
  const std::function<void()>* body = nullptr;
  // Set after a fault: every thread still in the block unwinds (BlockAborted) and exits, so it
  // ends as a thread that finished (its stack unwound, its memory ordered before the next).
  std::atomic<bool> aborting{false};
  std::string fault;  // written by the faulting thread (ordered by `fault_sync`)
  char block_start = 0, block_done = 0, fault_sync = 0, barrier[2] = {0, 0};  // sync addresses
};

Runner& runner() {
  thread_local Runner r;
  return r;
}

// The lane running now on this OS thread (read by its fiber, set by the scheduler).
thread_local std::atomic<Lane*> current_lane{nullptr};

Lane& current() {
  Lane* l = current_lane.load(std::memory_order_relaxed);
  if (l == nullptr) {
    std::fprintf(stderr, "strata cuda emulator: a CUDA builtin was used outside a kernel\n");
    std::abort();
  }
  return *l;
}

std::string where(const ThreadIndex& i) {
  return fmt::format("thread ({},{},{}) of block ({},{},{})", i.thread.x, i.thread.y, i.thread.z,
                     i.block.x, i.block.y, i.block.z);
}

// Thrown at a thread's wait when its block is aborted; caught by lane_main.
struct BlockAborted {};

// After a thread's wait: unwinds it when its block has faulted.
void resume_or_unwind(const Lane& l) {
  if (l.runner->aborting.load(std::memory_order_relaxed)) throw BlockAborted{};
}

// From inside a thread: records the fault and stops the thread (resumed only to unwind).
[[noreturn]] void thread_fault(Lane& l, const std::string& what) {
  l.runner->fault = what + " (" + where(l.index) + ")";
  tsan_release(&l.runner->fault_sync);
  l.wait.store(Wait::Faulted, std::memory_order_relaxed);
  l.fiber->yield();
  throw BlockAborted{};
}

STRATA_EMU_UNINSTRUMENTED void lane_main(void* p) {
  Lane& l = *static_cast<Lane*>(p);
  Runner* const r = l.runner;
  Fiber* const f = l.fiber;
  tsan_acquire(&r->block_start);
  try {
    if (!r->aborting.load(std::memory_order_relaxed)) (*r->body)();
  } catch (const BlockAborted&) {
  }
  l.wait.store(Wait::Exited, std::memory_order_relaxed);
  // After this release the scheduler may set the lane up for the next block: only locals from
  // here on.
  tsan_release(&r->block_done);
  f->finish();
}

bool exited(const Lane& l) {
  return l.wait.load(std::memory_order_relaxed) == Wait::Exited;
}

std::string site(const Lane& l) {
  const char* f = l.file.load(std::memory_order_relaxed);
  const char* slash = std::strrchr(f, '/');
  return fmt::format("{}:{}", slash != nullptr ? slash + 1 : f,
                     l.line.load(std::memory_order_relaxed));
}

bool same_site(const Lane& a, const Lane& b) {
  return a.line.load(std::memory_order_relaxed) == b.line.load(std::memory_order_relaxed) &&
         std::strcmp(a.file.load(std::memory_order_relaxed),
                     b.file.load(std::memory_order_relaxed)) == 0;
}

// Opens every shuffle whose lanes have all arrived. Returns whether one opened; `fault` is set
// when a mask names a lane that cannot come or the lanes disagree.
bool open_shuffles(Lane* lanes, int n, std::string& fault) {
  bool opened = false;
  for (int i = 0; i < n; ++i) {
    Lane& l = lanes[i];
    if (l.wait.load(std::memory_order_relaxed) != Wait::Shuffle) continue;
    const int warp0 = i / kWarpSize * kWarpSize;
    const uint32_t mask = l.mask.load(std::memory_order_relaxed);
    bool all = true;
    for (int b = 0; b < kWarpSize; ++b) {
      if (((mask >> b) & 1u) == 0) continue;
      const int j = warp0 + b;
      if (j >= n || exited(lanes[j])) {
        fault = fmt::format("a shuffle's mask {:#010x} names lane {}, which {} ({})", mask, b,
                            j >= n ? "the block does not have" : "has exited", where(l.index));
        return false;
      }
      const Lane& o = lanes[j];
      if (o.wait.load(std::memory_order_relaxed) != Wait::Shuffle) {
        all = false;
        continue;
      }
      if (o.mask.load(std::memory_order_relaxed) != mask) {
        fault = fmt::format("lanes of a warp shuffle with masks {:#010x} and {:#010x} ({})", mask,
                            o.mask.load(std::memory_order_relaxed), where(o.index));
        return false;
      }
    }
    if (!all) continue;
    for (int b = 0; b < kWarpSize; ++b) {
      if (((mask >> b) & 1u) == 0) continue;
      Lane& o = lanes[warp0 + b];
      const int src = o.source.load(std::memory_order_relaxed);
      const Lane& from = ((mask >> src) & 1u) != 0 ? lanes[warp0 + src] : o;
      o.result.store(from.value.load(std::memory_order_relaxed), std::memory_order_relaxed);
      o.wait.store(Wait::Ready, std::memory_order_relaxed);
    }
    opened = true;
  }
  return opened;
}

// Opens the barrier when every thread that has not exited waits at it (at one place).
bool open_barrier(Lane* lanes, int n, std::string& fault) {
  const Lane* first = nullptr;
  for (int i = 0; i < n; ++i) {
    const Wait w = lanes[i].wait.load(std::memory_order_relaxed);
    if (w == Wait::Exited) continue;
    if (w != Wait::Barrier) return false;
    if (first == nullptr) {
      first = &lanes[i];
    } else if (!same_site(*first, lanes[i])) {
      fault = fmt::format("divergent __syncthreads: {} waits at {}, {} at {}", where(first->index),
                          site(*first), where(lanes[i].index), site(lanes[i]));
      return false;
    }
  }
  if (first == nullptr) return false;
  for (int i = 0; i < n; ++i)
    if (!exited(lanes[i])) lanes[i].wait.store(Wait::Ready, std::memory_order_relaxed);
  return true;
}

std::string deadlock(const Lane* lanes, int n) {
  std::string what = "deadlock: no thread can go on;";
  int shown = 0;
  for (int i = 0; i < n && shown < 4; ++i) {
    const Wait w = lanes[i].wait.load(std::memory_order_relaxed);
    if (w == Wait::Barrier) {
      what += fmt::format(" {} waits at __syncthreads {};", where(lanes[i].index), site(lanes[i]));
      ++shown;
    } else if (w == Wait::Shuffle) {
      what += fmt::format(" {} waits at a shuffle with mask {:#010x};", where(lanes[i].index),
                          lanes[i].mask.load(std::memory_order_relaxed));
      ++shown;
    }
  }
  what.pop_back();
  return what;
}

// Resumes every thread that has not exited, each unwinding to its end (aborting is set).
void unwind_block(Runner& r, int n) {
  r.aborting.store(true, std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    Lane& l = r.lanes[static_cast<size_t>(i)];
    if (exited(l)) continue;
    current_lane.store(&l, std::memory_order_relaxed);
    r.fibers[static_cast<size_t>(i)]->resume();
  }
  current_lane.store(nullptr, std::memory_order_relaxed);
  r.aborting.store(false, std::memory_order_relaxed);
}

// Runs the started block to its end or its first fault ("" when none).
std::string run_block(Runner& r, int n) {
  Lane* lanes = r.lanes.get();
  int live = n;
  while (true) {
    for (int i = 0; i < n; ++i) {
      Lane& l = lanes[i];
      if (l.wait.load(std::memory_order_relaxed) != Wait::Ready) continue;
      current_lane.store(&l, std::memory_order_relaxed);
      r.fibers[static_cast<size_t>(i)]->resume();
      const Wait w = l.wait.load(std::memory_order_relaxed);
      if (w == Wait::Exited) --live;
      if (w == Wait::Faulted) {
        current_lane.store(nullptr, std::memory_order_relaxed);
        tsan_acquire(&r.fault_sync);
        return r.fault;
      }
    }
    current_lane.store(nullptr, std::memory_order_relaxed);
    if (live == 0) return "";
    std::string fault;
    const bool opened =
        open_shuffles(lanes, n, fault) || (fault.empty() && open_barrier(lanes, n, fault));
    if (!fault.empty()) return fault;
    if (!opened) return deadlock(lanes, n);
  }
}

}  // namespace

std::string launch_shape_error(const LaunchShape& s) {
  const uint64_t threads = uint64_t{s.block.x} * s.block.y * s.block.z;
  if (threads == 0 || s.grid.x == 0 || s.grid.y == 0 || s.grid.z == 0)
    return fmt::format("an empty launch (grid {}x{}x{}, block {}x{}x{})", s.grid.x, s.grid.y,
                       s.grid.z, s.block.x, s.block.y, s.block.z);
  if (threads > kMaxThreads) return fmt::format("{} threads in a block (at most 1024)", threads);
  if (s.block.z > 64) return fmt::format("block z of {} (at most 64)", s.block.z);
  if (s.grid.x > 0x7fffffffu) return fmt::format("grid x of {} (at most 2^31 - 1)", s.grid.x);
  if (s.grid.y > 65535 || s.grid.z > 65535)
    return fmt::format("grid y, z of {}, {} (at most 65535)", s.grid.y, s.grid.z);
  if (s.dynamic_shared > kSharedLimit)
    return fmt::format("{} bytes of dynamic shared memory (at most 48 KiB without opting in)",
                       s.dynamic_shared);
  return "";
}

std::string run_grid(const LaunchShape& s, const char* kernel,
                     const std::function<void()>& thread_body) {
  Runner& r = runner();
  const int n = static_cast<int>(s.block.x * s.block.y * s.block.z);
  while (r.fibers.size() < static_cast<size_t>(n))
    r.fibers.push_back(std::make_unique<Fiber>(kStackBytes));
  r.body = &thread_body;
  for (unsigned bz = 0; bz < s.grid.z; ++bz)
    for (unsigned by = 0; by < s.grid.y; ++by)
      for (unsigned bx = 0; bx < s.grid.x; ++bx) {
        for (int i = 0; i < n; ++i) {
          Lane& l = r.lanes[static_cast<size_t>(i)];
          l.runner = &r;
          l.fiber = r.fibers[static_cast<size_t>(i)].get();
          l.linear = i;
          const unsigned u = static_cast<unsigned>(i);
          l.index.thread = {u % s.block.x, u / s.block.x % s.block.y, u / (s.block.x * s.block.y)};
          l.index.block = {bx, by, bz};
          l.index.block_dim = s.block;
          l.index.grid_dim = s.grid;
          l.wait.store(Wait::Ready, std::memory_order_relaxed);
          l.rounds.store(0, std::memory_order_relaxed);
          l.fiber->start(&lane_main, &l);
        }
        tsan_release(&r.block_start);
        std::string fault = run_block(r, n);
        if (!fault.empty()) unwind_block(r, n);
        tsan_acquire(&r.block_done);
        if (!fault.empty()) return fmt::format("{}: {}", kernel, fault);
      }
  return "";
}

const ThreadIndex& this_thread() {
  return current().index;
}

void sync_threads(const char* file, unsigned line) {
  Lane& l = current();
  const uint32_t round = l.rounds.load(std::memory_order_relaxed);
  l.file.store(file, std::memory_order_relaxed);
  l.line.store(line, std::memory_order_relaxed);
  // Two sync addresses in turn: a thread that has passed barrier r and reaches r + 1 must not
  // hand its later work to a thread still acquiring barrier r.
  tsan_release(&l.runner->barrier[round & 1]);
  l.wait.store(Wait::Barrier, std::memory_order_relaxed);
  l.fiber->yield();
  resume_or_unwind(l);
  tsan_acquire(&l.runner->barrier[round & 1]);
  l.rounds.store(round + 1, std::memory_order_relaxed);
}

void trap() {
  thread_fault(current(), "__trap()");
}

uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask, int width) {
  Lane& l = current();
  const int lane = l.linear % kWarpSize;
  if (((mask >> lane) & 1u) == 0)
    thread_fault(l,
                 fmt::format("a shuffle's mask {:#010x} leaves out its own lane {}", mask, lane));
  if (width <= 0 || width > kWarpSize || (width & (width - 1)) != 0)
    thread_fault(l, fmt::format("a shuffle of width {} (a power of 2 up to 32)", width));
  int src = lane ^ lane_mask;
  if (src < 0 || src >= kWarpSize || src / width != lane / width) src = lane;  // its own value
  l.mask.store(mask, std::memory_order_relaxed);
  l.source.store(src, std::memory_order_relaxed);
  l.value.store(bits, std::memory_order_relaxed);
  l.wait.store(Wait::Shuffle, std::memory_order_relaxed);
  l.fiber->yield();
  resume_or_unwind(l);
  return l.result.load(std::memory_order_relaxed);
}

}  // namespace strata::cuda_emu
