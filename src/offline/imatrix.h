// `strata imatrix`: an importance matrix of a model over a text, as llama-imatrix computes it:
// for every matrix, the sum over the tokens read of its input's squares, column by column, and
// the number of tokens (format/imatrix_file.h writes it in llama-imatrix's GGUF). The inputs are
// the four points every layer multiplies (the attention's input for q/k/v, the attention's
// output for attn_output, the FFN's input for gate/up, its hidden activation for ffn_down),
// observed in a dense run over windows of the text, each from BOS.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/imatrix_file.h"
#include "model/model.h"

namespace strata {

struct ImatrixOptions {
  int64_t n_ctx = 512;     // window (llama-imatrix's -c)
  int64_t max_tokens = 0;  // tokens read at most (0: the whole text)
  std::string dataset;     // what imatrix.datasets names
};

// progress(tokens done, tokens in all). Fails for a mixture of experts (their experts' inputs
// are per expert; not collected yet).
Imatrix collect_imatrix(const Model& model, const std::vector<int32_t>& tokens,
                        const ImatrixOptions& options, ThreadPool& pool,
                        const std::function<void(int64_t, int64_t)>& progress = {});

// The weight tensors of a layer that read a point (model/input_thresholds.h's MatrixInput), by
// the names GGUF files give them: what an entry is written under.
std::vector<std::string> matrices_reading(int point, int64_t layer);

}  // namespace strata
