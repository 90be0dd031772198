#include "core/mapping_faults.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

namespace strata {

namespace {

// Slots the handler reads without locks: `begin` is published last (release) and cleared first.
struct Watched {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uint64_t> size{0};
  char path[512] = {};
};

constexpr size_t kSlots = 64;
Watched slots[kSlots];
std::mutex slots_mutex;  // writers only

void write_all(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void write_text(const char* s) { write_all(s, std::strlen(s)); }

// Async-signal-safe: only reads of the slots, write(2) and _exit.
void on_sigbus(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const Watched& w : slots) {
    const uintptr_t begin = w.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr - begin >= w.size.load(std::memory_order_relaxed)) continue;
    write_text("error: '");
    write_text(w.path);
    write_text("' changed while strata had it mapped (truncated or rewritten: a read past its end "
               "failed); strata stops\n");
    ::_exit(kMappingFaultExitCode);
  }
  // Not a watched mapping: the default action (the fault repeats when this returns).
  ::signal(sig, SIG_DFL);
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

}  // namespace

void watch_mapping(const void* begin, uint64_t size, const std::string& path) {
  if (begin == nullptr || size == 0) return;
  install_once();
  std::lock_guard lock(slots_mutex);
  for (Watched& w : slots) {
    if (w.begin.load(std::memory_order_relaxed) != 0) continue;
    const size_t n = std::min(path.size(), sizeof(w.path) - 1);
    std::memcpy(w.path, path.data(), n);
    w.path[n] = '\0';
    w.size.store(size, std::memory_order_relaxed);
    w.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
    return;
  }
}

void unwatch_mapping(const void* begin) {
  if (begin == nullptr) return;
  std::lock_guard lock(slots_mutex);
  for (Watched& w : slots)
    if (w.begin.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(begin))
      w.begin.store(0, std::memory_order_release);
}

}  // namespace strata
