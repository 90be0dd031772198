#include "cli/bench_speculative.h"

#include <fmt/format.h>

#include <algorithm>

#include "cli/bench_table.h"
#include "core/timer.h"

namespace strata {
namespace {

SamplerParams greedy() {
  SamplerParams p;
  p.temperature = 0;
  return p;
}

// n_gen greedy tokens after the prompt, one a pass; its tok/s to `speed`.
std::vector<int32_t> plain_run(Session& session, std::span<const int32_t> prompt, int n_gen,
                               std::vector<double>& speed) {
  session.reset();
  Sampler sampler(greedy());
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  history.push_back(sampler.sample(session.eval(prompt), history));
  Timer t;
  while (static_cast<int>(history.size() - prompt.size()) < n_gen)
    history.push_back(sampler.sample(session.eval(history.back()), history));
  speed.push_back((n_gen - 1) / t.seconds());
  return {history.begin() + static_cast<std::ptrdiff_t>(prompt.size()), history.end()};
}

std::vector<int32_t> speculative_run(Session& session, Drafter& drafter,
                                     const SpeculationParams& params,
                                     std::span<const int32_t> prompt, int n_gen,
                                     std::vector<double>& speed, SpeculationStats& total) {
  session.reset();
  Sampler sampler(greedy());
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  history.push_back(sampler.sample(session.eval(prompt), history));
  drafter.forget(0);
  drafter.prepare(0, history);  // the draft model reads the prompt outside the timer
  SpeculativeDecoder spec(session, sampler, nullptr, drafter, params);
  std::vector<int32_t> out = {history.back()};
  Timer t;
  while (static_cast<int>(out.size()) < n_gen)
    spec.step(history, [&](int32_t token) {
      out.push_back(token);
      return static_cast<int>(out.size()) >= n_gen;
    });
  speed.push_back((n_gen - 1) / t.seconds());
  total += spec.stats();
  return out;
}

}  // namespace

double SpeculativeBench::plain_median() const {
  return median_of(plain);
}
double SpeculativeBench::speculative_median() const {
  return median_of(speculative);
}

SpeculativeBench measure_speculative(Session& session, const Speculation& speculation,
                                     const SpeculationParams& params,
                                     std::span<const int32_t> prompt, int n_gen, int reps) {
  SpeculativeBench b;
  session.eval(prompt.front());  // warm-up: maps every weight page
  for (int rep = 0; rep < reps; ++rep) {
    const auto plain = plain_run(session, prompt, n_gen, b.plain);
    const auto spec = speculative_run(session, *speculation.drafter, params, prompt, n_gen,
                                      b.speculative, b.stats);
    const auto diff = std::mismatch(plain.begin(), plain.end(), spec.begin(), spec.end());
    if (diff.first != plain.end() && b.first_difference < 0)
      b.first_difference = diff.first - plain.begin();
  }
  return b;
}

nlohmann::json speculative_bench_json(const SpeculativeBench& b, const Speculation& speculation,
                                      int n_prompt, int n_gen) {
  nlohmann::json j = speculation_json(speculation, b.stats);
  j["n_prompt"] = n_prompt;
  j["n_gen"] = n_gen;
  j["plain_tokens_per_s"] = b.plain_median();
  j["speculative_tokens_per_s"] = b.speculative_median();
  j["speedup"] = b.plain_median() > 0 ? b.speculative_median() / b.plain_median() : 0.0;
  j["plain_runs"] = b.plain;
  j["speculative_runs"] = b.speculative;
  j["same_text"] = b.first_difference < 0;
  j["first_difference"] = b.first_difference;
  return {{"speculative", j}};
}

std::string speculative_bench_text(const SpeculativeBench& b, const Speculation& speculation,
                                   int n_prompt, int n_gen) {
  const std::string text =
      b.first_difference < 0
          ? "the same text"
          : fmt::format("the text differs from token {} (a greedy tie?)", b.first_difference);
  return fmt::format(
      "tg{} after pp{}: plain {:.2f} tok/s, speculative {:.2f} tok/s ({:.2f}x; medians of {}, "
      "alternating); {}\nspeculative, {}\n",
      n_gen, n_prompt, b.plain_median(), b.speculative_median(),
      b.plain_median() > 0 ? b.speculative_median() / b.plain_median() : 0.0, b.plain.size(), text,
      speculation_line(speculation, b.stats));
}

}  // namespace strata
