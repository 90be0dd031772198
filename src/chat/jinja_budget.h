// What one template render may spend, so that no template (a GGUF's chat_template is untrusted
// input, run at load and at every request) can hang a core or grow the process by gigabytes:
// steps (statements, loop iterations, and the work inside operators and filters, charged per
// element they touch) and bytes (what operators and filters build, counted before they build
// it). Past either, the render fails with an Error naming the budget.
//
// The renderer installs one budget per render on its thread (RenderBudget::Scope); the builtins
// charge the thread's current one, so that every operator and filter is counted without a
// budget threaded through each call. Outside a render nothing is charged.
#pragma once

#include <cstdint>
#include <functional>

namespace strata::jinja {

constexpr uint64_t kMaxRenderSteps = 2'000'000;
constexpr uint64_t kMaxRenderBytes = uint64_t{512} << 20;
constexpr int kMaxValueDepth = 256;  // lists and dicts inside each other (and traversals of them)

// What a caller lends one render beyond the fixed budgets: `reserve(bytes)` is asked for memory
// before the render builds past what it was lent (1 MiB at a time), and false fails the render
// naming it (the server lends from its --request-memory: eight renders of 512 MiB at once were
// over any budget), and past `max_bytes` in all the render fails too (so that one render cannot
// hold the memory every other request needs). Unset: kMaxRenderBytes alone bounds it.
struct RenderLimits {
  std::function<bool(uint64_t bytes)> reserve;
  uint64_t max_bytes = kMaxRenderBytes;  // at most this many built in all
  uint64_t max_steps = kMaxRenderSteps;  // and this many steps (a fuzzer's search stays fast)
};

class RenderBudget {
 public:
  explicit RenderBudget(RenderLimits limits = {}) : limits_(std::move(limits)) {}
  void charge_steps(uint64_t n);
  void charge_bytes(uint64_t n);
  uint64_t steps() const { return steps_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t bytes_left() const;

  // Makes `budget` the current thread's for its life (the previous one is restored after).
  class Scope {
   public:
    explicit Scope(RenderBudget& budget);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    RenderBudget* previous_;
  };

 private:
  RenderLimits limits_;
  uint64_t steps_ = 0, bytes_ = 0;
  uint64_t lent_ = 0;  // bytes limits_.reserve has granted
};

// Against the current thread's budget (none: nothing is charged).
void charge_steps(uint64_t n);
void charge_bytes(uint64_t n);
// What the current render may still build (bytes), so that what is built piece by piece (a
// replace, a split, a range) stops at the budget before it has built past it, not after; the
// most one operation may build when no render is under way.
uint64_t bytes_left(uint64_t most);

class Value;
// What working through v costs in steps: its elements (a string: per 64 bytes).
uint64_t work_units(const Value& v);
// The bytes making v took: a string's, a list's slots and the strings in them (copied with
// it; nested lists and dicts are shared, not copied).
uint64_t built_bytes(const Value& v);

// One level deeper in a traversal of values (repr, tojson, ==, <): a namespace may hold itself,
// so a traversal is bounded by depth, not by the value's shape. Error past kMaxValueDepth.
class NestingGuard {
 public:
  NestingGuard();
  ~NestingGuard();
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;
};

}  // namespace strata::jinja
