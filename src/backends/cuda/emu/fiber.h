// A fiber: a function running on a stack of its own, switched to and from on one OS thread.
// The CUDA emulator runs each CUDA thread of a block as one (emu/grid.h): a switch costs tens of
// nanoseconds where an OS thread's rendezvous costs microseconds, so a block of 128 threads
// meeting at 40 warp shuffles runs in about 0.1 ms instead of 20 (measured in session 13).
//
// x86-64 switches with a few instructions of its own (the callee-saved registers, MXCSR and the
// x87 control word); other machines use ucontext (correct, slower: a system call a switch).
// Under AddressSanitizer and ThreadSanitizer every switch is announced to the sanitizer, so
// each fiber is a thread of its own to TSan: the switch itself orders nothing, and only what
// the emulator releases and acquires at a barrier does (a missing __syncthreads is a race).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace strata::cuda_emu {

class Fiber {
 public:
  explicit Fiber(size_t stack_bytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Makes the fiber run entry(arg) from the start at its next resume(); entry must end by
  // calling finish(), never by returning. Only when it has finished (or never started).
  void start(void (*entry)(void*), void* arg);
  // From the OS thread's own context: runs the fiber until it calls yield() or finish().
  void resume();
  // From inside the fiber: back to the context that resumed it; returns at the next resume().
  void yield();
  // From inside the fiber: back for good (until start() again); its stack's contents are dead.
  [[noreturn]] void finish();

  struct Context;  // the saved registers and the sanitizers' state (fiber.cpp)

 private:
  void switch_out(bool dying);
  std::unique_ptr<Context> self_;
};

}  // namespace strata::cuda_emu
