// What the emulator tells the sanitizers, and nothing where none is built in: fibers switch
// stacks (AddressSanitizer must know where each stack is) and order nothing by themselves
// (ThreadSanitizer sees each as a thread; the emulator releases and acquires where a GPU
// orders memory: barriers, the start and end of a block).
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_EMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define STRATA_EMU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(STRATA_EMU_ASAN)
#define STRATA_EMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(STRATA_EMU_TSAN)
#define STRATA_EMU_TSAN 1
#endif

#if defined(STRATA_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

// For the frames a fiber leaves without returning (its start, its end, the switch out of it):
// ThreadSanitizer keeps a call stack per fiber that an entry without its exit would grow until
// it overflows (a fiber runs once per CUDA thread per block), so these get no instrumentation.
#if defined(STRATA_EMU_TSAN) && defined(__clang__)
#define STRATA_EMU_UNINSTRUMENTED __attribute__((disable_sanitizer_instrumentation))
#else
#define STRATA_EMU_UNINSTRUMENTED
#endif

namespace strata::cuda_emu {

// A happens-before edge from every release on `sync` to the acquires after it.
inline void tsan_release([[maybe_unused]] void* sync) {
#if defined(STRATA_EMU_TSAN)
  __tsan_release(sync);
#endif
}
inline void tsan_acquire([[maybe_unused]] void* sync) {
#if defined(STRATA_EMU_TSAN)
  __tsan_acquire(sync);
#endif
}

}  // namespace strata::cuda_emu
