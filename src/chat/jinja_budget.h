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

namespace strata::jinja {

constexpr uint64_t kMaxRenderSteps = 5'000'000;
constexpr uint64_t kMaxRenderBytes = uint64_t{512} << 20;
constexpr int kMaxValueDepth = 256;  // lists and dicts inside each other (and traversals of them)

class RenderBudget {
 public:
  void charge_steps(uint64_t n);
  void charge_bytes(uint64_t n);
  uint64_t steps() const { return steps_; }
  uint64_t bytes() const { return bytes_; }

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
  uint64_t steps_ = 0, bytes_ = 0;
};

// Against the current thread's budget (none: nothing is charged).
void charge_steps(uint64_t n);
void charge_bytes(uint64_t n);

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
