// How far a model's next-token distributions are from a base model's, as llama-perplexity's
// --kl-divergence reports it: per prediction KL(base || model) over the base tokens above
// e^-16, the change of the probability of the actual next token (delta p), whether both rank
// the same token first; summed into means with uncertainties and percentiles. A quantized file
// is judged by these against its float original: perplexity alone rewards a file whose errors
// happen to sharpen an under-confident model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace strata {

struct KlPrediction {
  double kld = 0;         // KL(base || model), nats
  double nll = 0;         // -log p_model(next)
  double nll_base = 0;    // -log p_base(next)
  double p_diff = 0;      // p_model(next) - p_base(next)
  bool same_top = false;  // both put the same token first
};

// One prediction: `logits` of the model, `base_row` packed as in log_prob_file.h.
KlPrediction kl_prediction(std::span<const float> logits, std::span<const uint16_t> base_row,
                           int32_t next_token);

struct Estimate {
  double value = 0, uncertainty = 0;
};

struct KlSummary {
  int64_t predictions = 0;
  Estimate ppl, ppl_base, ln_ppl_ratio, ppl_ratio, kld, delta_p, delta_p_rms, same_top;
  double ln_ppl_correlation = 0;
  // Percentiles of KLD and delta p at kQuantiles (0 = minimum, 1 = maximum).
  std::vector<double> kld_quantiles, delta_p_quantiles;
};

inline constexpr double kQuantiles[] = {1.0,  0.999, 0.99, 0.95, 0.9,   0.75, 0.5,
                                        0.25, 0.1,   0.05, 0.01, 0.001, 0.0};

class KlAccumulator {
 public:
  void add(const KlPrediction& p);
  KlSummary summary() const;
  int64_t count() const { return static_cast<int64_t>(kld_.size()); }

 private:
  double nll_ = 0, nll2_ = 0, nll_base_ = 0, nll_base2_ = 0, nll_nll_base_ = 0;
  double kld_sum_ = 0, kld2_ = 0, p_diff_ = 0, p_diff2_ = 0, p_diff4_ = 0;
  int64_t same_top_ = 0;
  std::vector<float> kld_, p_diffs_;
};

// Linear interpolation between the sorted values, as llama-perplexity's percentiles.
double percentile(std::span<const float> sorted, double fraction);

}  // namespace strata
