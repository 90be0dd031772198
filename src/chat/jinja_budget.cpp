#include "chat/jinja_budget.h"

#include <fmt/format.h>

#include <algorithm>

#include "chat/jinja_value.h"

namespace strata::jinja {

namespace {

thread_local RenderBudget* current = nullptr;
thread_local int nesting = 0;

}  // namespace

void RenderBudget::charge_steps(uint64_t n) {
  const uint64_t most = std::min(kMaxRenderSteps, limits_.max_steps);
  steps_ = n > most - std::min(steps_, most) ? most + 1 : steps_ + n;
  if (steps_ > most) throw Error(fmt::format("the template runs too long (over its budget of {} steps)", most));
}

void RenderBudget::charge_bytes(uint64_t n) {
  bytes_ = n > kMaxRenderBytes - std::min(bytes_, kMaxRenderBytes) ? kMaxRenderBytes + 1 : bytes_ + n;
  const uint64_t most = std::min(kMaxRenderBytes, limits_.max_bytes);
  if (bytes_ > most)
    throw Error(fmt::format("the template builds more than its budget of {} MiB", most >> 20));
  if (!limits_.reserve || bytes_ <= lent_) return;
  const uint64_t more = std::max<uint64_t>(bytes_ - lent_, uint64_t{1} << 20);
  if (!limits_.reserve(more))
    throw Error(fmt::format("the template builds {} MiB, more than the server's request memory "
                            "lends it now",
                            bytes_ >> 20));
  lent_ += more;
}

RenderBudget::Scope::Scope(RenderBudget& budget) : previous_(current) { current = &budget; }
RenderBudget::Scope::~Scope() { current = previous_; }

uint64_t RenderBudget::bytes_left() const {
  const uint64_t most = std::min(kMaxRenderBytes, limits_.max_bytes);
  return most - std::min(most, bytes_);
}

uint64_t bytes_left(uint64_t most) { return current ? std::min(most, current->bytes_left()) : most; }

void charge_steps(uint64_t n) {
  if (current) current->charge_steps(n);
}

void charge_bytes(uint64_t n) {
  if (current) current->charge_bytes(n);
}

uint64_t work_units(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String: return v.as_string().size() / 64 + 1;
    case Value::Kind::List: return v.as_list().size() + 1;
    case Value::Kind::Generator: return v.generator_items().size() + 1;
    case Value::Kind::Dict:
    case Value::Kind::Namespace: return v.as_dict().size() + 1;
    default: return 1;
  }
}

uint64_t built_bytes(const Value& v) {
  auto strings = [](const Value& x) { return x.is_string() ? x.as_string().size() : 0; };
  uint64_t n = sizeof(Value);
  switch (v.kind()) {
    case Value::Kind::String: return n + v.as_string().size();
    case Value::Kind::List:
    case Value::Kind::Generator: {
      const List& l = v.kind() == Value::Kind::List ? v.as_list() : v.generator_items();
      for (const Value& x : l) n += sizeof(Value) + strings(x);
      return n;
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace:
      for (const auto& [k, x] : v.as_dict().items()) n += 2 * (sizeof(Value) + k.size()) + strings(x);
      return n;
    default: return n;
  }
}

NestingGuard::NestingGuard() {
  if (++nesting > kMaxValueDepth) {
    --nesting;
    throw Error(fmt::format("values nest deeper than {} levels", kMaxValueDepth));
  }
}

NestingGuard::~NestingGuard() { --nesting; }

}  // namespace strata::jinja
