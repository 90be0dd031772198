// Perplexity as llama.cpp computes it, so figures compare across engines: the text is
// tokenized with BOS, cut into non-overlapping windows of n_ctx tokens whose first token is
// replaced by BOS, and each window scores the predictions of its second half (tokens
// n_ctx/2+1 .. n_ctx-1), the first half serving as context.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runtime/session.h"

namespace strata {

struct PerplexityResult {
  double perplexity = 0;
  double mean_nll = 0;
  int64_t predictions = 0;
  int64_t windows = 0;
  std::vector<double> running;  // perplexity after each window
};

// Sees each scored prediction in order: the logits and the token that follows.
using PredictionObserver = std::function<void(std::span<const float> logits, int32_t next)>;

// max_windows <= 0: all windows. progress(done, total) after each window.
PerplexityResult measure_perplexity(Session& session, const std::vector<int32_t>& tokens,
                                    int32_t bos, int64_t max_windows,
                                    const std::function<void(int64_t, int64_t)>& progress = {},
                                    const PredictionObserver& observe = {});

}  // namespace strata
