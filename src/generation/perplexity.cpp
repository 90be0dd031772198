#include "generation/perplexity.h"

#include <cmath>

#include "core/error.h"

namespace strata {

PerplexityResult measure_perplexity(Session& session, const std::vector<int32_t>& tokens,
                                    int32_t bos, int64_t max_windows,
                                    const std::function<void(int64_t, int64_t)>& progress,
                                    const PredictionObserver& observe) {
  const int64_t n_ctx = session.n_ctx();
  if (n_ctx < 4) fail("perplexity needs a context of at least 4 tokens, got {}", n_ctx);
  int64_t windows = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (windows == 0)
    fail("the text has {} tokens, fewer than one window of {} (lower -c)", tokens.size(), n_ctx);
  if (max_windows > 0) windows = std::min(windows, max_windows);

  PerplexityResult r;
  double nll = 0;
  std::vector<int32_t> window(n_ctx);
  const int64_t first = n_ctx / 2;
  for (int64_t w = 0; w < windows; ++w) {
    std::copy(tokens.begin() + w * n_ctx, tokens.begin() + (w + 1) * n_ctx, window.begin());
    if (bos >= 0) window[0] = bos;
    session.reset();
    // The whole window in one batched pass; row j of the logits predicts token j + 1.
    const auto all = session.eval(std::span<const int32_t>(window.data(), n_ctx - 1), true);
    const int64_t n_vocab = static_cast<int64_t>(all.size()) / (n_ctx - 1);
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const auto logits = all.subspan(j * n_vocab, n_vocab);
      // log softmax in double: -log p(next) = log sum exp(l - max) - (l_next - max)
      double max = logits[0];
      for (float l : logits) max = std::max(max, double{l});
      double sum = 0;
      for (float l : logits) sum += std::exp(double{l} - max);
      nll += std::log(sum) - (double{logits[window[j + 1]]} - max);
      ++r.predictions;
      if (observe) observe(logits, window[j + 1]);
    }
    r.running.push_back(std::exp(nll / static_cast<double>(r.predictions)));
    if (progress) progress(w + 1, windows);
  }
  r.windows = windows;
  r.mean_nll = nll / static_cast<double>(r.predictions);
  r.perplexity = std::exp(r.mean_nll);
  return r;
}

}  // namespace strata
