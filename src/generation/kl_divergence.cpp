#include "generation/kl_divergence.h"

#include <algorithm>
#include <cmath>

#include "generation/log_prob_file.h"

namespace strata {
namespace {

// Mean of the summed values and the uncertainty of that mean (none below 11 values).
Estimate mean_of(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const double n = static_cast<double>(count), mean = sum / n, var = sum2 / n - mean * mean;
  return {mean, var > 0 && count > 10 ? std::sqrt(var / (n - 1)) : 0.0};
}

// Covariance of the two means (as llama-perplexity: none below 10 values).
double covariance_of(double sum_a, double sum_b, double sum_ab, int64_t count) {
  if (count < 10) return 0;
  const double n = static_cast<double>(count);
  return (sum_ab / n - (sum_a / n) * (sum_b / n)) / (n - 1);
}

std::vector<double> quantiles_of(std::vector<float> values) {
  std::sort(values.begin(), values.end());
  std::vector<double> out;
  for (double q : kQuantiles) out.push_back(percentile(values, q));
  return out;
}

}  // namespace

KlPrediction kl_prediction(std::span<const float> logits, std::span<const uint16_t> base_row,
                           int32_t next_token) {
  float max_logit = logits[0];
  size_t top = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > max_logit) max_logit = logits[i], top = i;
  double sum_exp = 0;
  for (float l : logits) sum_exp += std::exp(l - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float log_norm = max_logit + log_sum_exp;  // log p(i) = logits[i] - log_norm

  KlPrediction r;
  r.nll = log_norm - logits[next_token];
  r.nll_base = -packed_log_prob(base_row, next_token);
  size_t top_base = 0;
  float top_base_log_p = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float log_p_base = packed_log_prob(base_row, static_cast<int64_t>(i));
    if (i == 0 || log_p_base > top_base_log_p) top_base_log_p = log_p_base, top_base = i;
    // Tokens the base gives under e^-16 were not stored exactly (see log_prob_file.h).
    if (log_p_base > -16.f) r.kld += std::exp(log_p_base) * (log_p_base - logits[i] + log_norm);
  }
  r.same_top = top == top_base;
  r.p_diff = std::exp(-r.nll) - std::exp(-r.nll_base);
  return r;
}

void KlAccumulator::add(const KlPrediction& p) {
  nll_ += p.nll, nll2_ += p.nll * p.nll;
  nll_base_ += p.nll_base, nll_base2_ += p.nll_base * p.nll_base;
  nll_nll_base_ += p.nll * p.nll_base;
  kld_sum_ += p.kld, kld2_ += p.kld * p.kld;
  const double d2 = p.p_diff * p.p_diff;
  p_diff_ += p.p_diff, p_diff2_ += d2, p_diff4_ += d2 * d2;
  same_top_ += p.same_top;
  kld_.push_back(static_cast<float>(p.kld));
  p_diffs_.push_back(static_cast<float>(p.p_diff));
}

KlSummary KlAccumulator::summary() const {
  KlSummary s;
  const int64_t n = count();
  s.predictions = n;
  if (n == 0) return s;
  const Estimate ln_ppl = mean_of(nll_, nll2_, n), ln_base = mean_of(nll_base_, nll_base2_, n);
  s.ppl = {std::exp(ln_ppl.value), std::exp(ln_ppl.value) * ln_ppl.uncertainty};
  s.ppl_base = {std::exp(ln_base.value), std::exp(ln_base.value) * ln_base.uncertainty};
  const double cov = covariance_of(nll_, nll_base_, nll_nll_base_, n);
  const double var =
      ln_ppl.uncertainty * ln_ppl.uncertainty + ln_base.uncertainty * ln_base.uncertainty - 2 * cov;
  s.ln_ppl_ratio = {ln_ppl.value - ln_base.value, std::sqrt(std::max(var, 0.0))};
  const double ratio = std::exp(s.ln_ppl_ratio.value);
  s.ppl_ratio = {ratio, ratio * s.ln_ppl_ratio.uncertainty};
  const double spread = ln_ppl.uncertainty * ln_base.uncertainty;
  s.ln_ppl_correlation = spread > 0 ? cov / spread : 0;
  s.kld = mean_of(kld_sum_, kld2_, n);
  s.delta_p = mean_of(p_diff_, p_diff2_, n);
  const Estimate mse = mean_of(p_diff2_, p_diff4_, n);
  const double rms = std::sqrt(mse.value);
  s.delta_p_rms = {rms, rms > 0 ? 0.5 / rms * mse.uncertainty : 0};
  const double top = static_cast<double>(same_top_) / static_cast<double>(n);
  s.same_top = {top, n > 1 ? std::sqrt(top * (1 - top) / static_cast<double>(n - 1)) : 0};
  s.kld_quantiles = quantiles_of(kld_);
  s.delta_p_quantiles = quantiles_of(p_diffs_);
  return s;
}

double percentile(std::span<const float> sorted, double fraction) {
  if (sorted.empty()) return 0;
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  const double p = fraction * static_cast<double>(sorted.size() - 1);
  const auto i = static_cast<size_t>(p);
  const double f = p - static_cast<double>(i);
  return (1 - f) * sorted[i] + f * sorted[std::min(i + 1, sorted.size() - 1)];
}

}  // namespace strata
