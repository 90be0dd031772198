#include "backends/cuda/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "backends/cuda/emu/sanitizers.h"

#if defined(STRATA_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__x86_64__)
#define STRATA_EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

#if defined(STRATA_EMU_ASM_SWITCH)
// strata_emu_swap(save, next): saves the callee-saved registers, MXCSR and the x87 control word
// on the current stack, stores the stack pointer in *save, and continues from `next` (a stack
// pointer saved the same way, or a new fiber's first frame). strata_emu_trampoline is where a
// new fiber's first frame returns to: it calls r13(r12) and never returns (the CFI marks it as
// the bottom of the stack for unwinders).
extern "C" void strata_emu_swap(void** save, void* next);
extern "C" void strata_emu_trampoline();
asm(R"(
  .text
  .globl strata_emu_swap
  .hidden strata_emu_swap
  .type strata_emu_swap, @function
  .p2align 4
strata_emu_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size strata_emu_swap, .-strata_emu_swap

  .globl strata_emu_trampoline
  .hidden strata_emu_trampoline
  .type strata_emu_trampoline, @function
  .p2align 4
strata_emu_trampoline:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%r13
  ud2
  .cfi_endproc
  .size strata_emu_trampoline, .-strata_emu_trampoline
)");
#endif

namespace strata::cuda_emu {

struct Fiber::Context {
  // The stack: a guard page below, then stack_bytes.
  char* map = nullptr;
  size_t map_bytes = 0;
  char* stack = nullptr;
  size_t stack_bytes = 0;
  size_t colour = 0;  // bytes below the top the first frame starts (see start())
  void (*entry)(void*) = nullptr;
  void* arg = nullptr;
  std::atomic<bool> running{false};  // set by start(), cleared by the fiber's finish()
#if defined(STRATA_EMU_ASM_SWITCH)
  void* sp = nullptr;         // the fiber's saved stack pointer
  void* caller_sp = nullptr;  // the resumer's
#else
  ucontext_t context{}, caller{};
#endif
#if defined(STRATA_EMU_ASAN)
  void* fake_stack = nullptr;         // the fiber's, while it is switched out
  void* caller_fake_stack = nullptr;  // the resumer's, while the fiber runs
  const void* caller_bottom = nullptr;
  size_t caller_size = 0;
#endif
#if defined(STRATA_EMU_TSAN)
  void* tsan_fiber = nullptr;
  // Written by the resumer, read by the fiber: atomic, so the switch needs no ordering.
  std::atomic<void*> tsan_caller{nullptr};
#endif
};

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "strata cuda emulator: %s\n", what);
  std::abort();
}

// The first thing a fiber runs, on its own stack.
STRATA_EMU_UNINSTRUMENTED void fiber_main(Fiber::Context* c) {
  tsan_acquire(c);  // what start() wrote (a thread's creation happens before its start)
#if defined(STRATA_EMU_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &c->caller_bottom, &c->caller_size);
#endif
  c->entry(c->arg);
  die("a fiber's entry returned instead of calling finish()");
}

#if !defined(STRATA_EMU_ASM_SWITCH)
void ucontext_main(unsigned hi, unsigned lo) {
  fiber_main(reinterpret_cast<Fiber::Context*>((uintptr_t{hi} << 32) | lo));
}
#endif

}  // namespace

Fiber::Fiber(size_t stack_bytes) : self_(std::make_unique<Context>()) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes = (stack_bytes + page - 1) / page * page;
  self_->map_bytes = stack_bytes + page;
  void* m =
      mmap(nullptr, self_->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  self_->map = static_cast<char*>(m);
  mprotect(self_->map, page, PROT_NONE);  // an overflow faults instead of writing elsewhere
  self_->stack = self_->map + page;
  self_->stack_bytes = stack_bytes;
  static std::atomic<unsigned> made{0};
  self_->colour = (made.fetch_add(1, std::memory_order_relaxed) % 64) * 64;
#if defined(STRATA_EMU_TSAN)
  self_->tsan_fiber = __tsan_create_fiber(0);
#endif
}

Fiber::~Fiber() {
  (void)self_->running.load(std::memory_order_acquire);  // after the fiber's last write
#if defined(STRATA_EMU_TSAN)
  __tsan_destroy_fiber(self_->tsan_fiber);
#endif
  munmap(self_->map, self_->map_bytes);
}

void Fiber::start(void (*entry)(void*), void* arg) {
  Context& c = *self_;
  if (c.running.load(std::memory_order_relaxed)) die("start() of a fiber that has not finished");
  c.entry = entry;
  c.arg = arg;
#if defined(STRATA_EMU_ASM_SWITCH)
  // The first frame, as strata_emu_swap pops it: control words, r15, r14, r13 = the function,
  // r12 = its argument, rbx, rbp = 0 (the end of frame-pointer chains), then the return
  // address. The trampoline then starts on a 16-byte aligned stack, as a call expects.
  // Each stack's top is offset by its colour: stacks a page multiple apart would otherwise put
  // every fiber's live frames in the same few cache sets (measured: the switch ran at a third
  // of its speed).
  auto* top = reinterpret_cast<uint64_t*>(
      (reinterpret_cast<uintptr_t>(c.stack + c.stack_bytes) - 64 - c.colour) & ~uintptr_t{15});
  uint64_t* f = top - 9;
  uint32_t mxcsr = 0;
  uint16_t fpu = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu));
  f[0] = fpu;
  f[1] = mxcsr;
  f[2] = 0;                                        // r15
  f[3] = 0;                                        // r14
  f[4] = reinterpret_cast<uint64_t>(&fiber_main);  // r13
  f[5] = reinterpret_cast<uint64_t>(&c);           // r12
  f[6] = 0;                                        // rbx
  f[7] = 0;                                        // rbp
  f[8] = reinterpret_cast<uint64_t>(&strata_emu_trampoline);
  c.sp = f;
#else
  getcontext(&c.context);
  c.context.uc_stack.ss_sp = c.stack;
  c.context.uc_stack.ss_size = c.stack_bytes;
  c.context.uc_link = nullptr;
  const auto p = reinterpret_cast<uintptr_t>(&c);
  makecontext(&c.context, reinterpret_cast<void (*)()>(&ucontext_main), 2,
              static_cast<unsigned>(p >> 32), static_cast<unsigned>(p & 0xffffffffu));
#endif
  c.running.store(true, std::memory_order_relaxed);
  tsan_release(&c);
}

void Fiber::resume() {
  Context& c = *self_;
  if (!c.running.load(std::memory_order_relaxed))
    die("resume() of a fiber that has not been started");
  void* const next = c.sp;  // read before the switch, as this thread
#if defined(STRATA_EMU_TSAN)
  c.tsan_caller.store(__tsan_get_current_fiber(), std::memory_order_relaxed);
  __tsan_switch_to_fiber(c.tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(STRATA_EMU_ASAN)
  __sanitizer_start_switch_fiber(&c.caller_fake_stack, c.stack, c.stack_bytes);
#endif
#if defined(STRATA_EMU_ASM_SWITCH)
  strata_emu_swap(&c.caller_sp, next);
#else
  swapcontext(&c.caller, &c.context);
#endif
#if defined(STRATA_EMU_ASAN)
  __sanitizer_finish_switch_fiber(c.caller_fake_stack, nullptr, nullptr);
#endif
}

STRATA_EMU_UNINSTRUMENTED void Fiber::switch_out(bool dying) {
  Context& c = *self_;
#if defined(STRATA_EMU_ASM_SWITCH)
  void* const back = c.caller_sp;  // written by the switch alone
#endif
#if defined(STRATA_EMU_TSAN)
  void* const caller = c.tsan_caller.load(std::memory_order_relaxed);
#endif
  // A finished fiber's last write: after it the owner may free the context, so from here on
  // only locals, and the switch's own stores (its stack pointer: no longer read).
  if (dying) c.running.store(false, std::memory_order_release);  // the destructor acquires it
#if defined(STRATA_EMU_TSAN)
  __tsan_switch_to_fiber(caller, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(STRATA_EMU_ASAN)
  // A dying fiber passes no place for its fake stack, which frees it.
  __sanitizer_start_switch_fiber(dying ? nullptr : &c.fake_stack, c.caller_bottom, c.caller_size);
#else
  (void)dying;
#endif
#if defined(STRATA_EMU_ASM_SWITCH)
  strata_emu_swap(&c.sp, back);
#else
  swapcontext(&c.context, &c.caller);
#endif
#if defined(STRATA_EMU_ASAN)
  __sanitizer_finish_switch_fiber(c.fake_stack, &c.caller_bottom, &c.caller_size);
#endif
}

void Fiber::yield() {
  switch_out(false);
}

STRATA_EMU_UNINSTRUMENTED void Fiber::finish() {
  switch_out(true);
  die("a finished fiber was resumed");
}

}  // namespace strata::cuda_emu
