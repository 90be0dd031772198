// Runs a tokenized text through a session in windows of n_ctx tokens (each window starts
// afresh, with BOS when the model has one), up to max_tokens in all: how the profiler and the
// predictor trainer see "the model reading text".
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/session.h"

namespace strata {

// Returns the number of tokens evaluated. progress(done, total) after each window.
int64_t run_text_windows(Session& session, const std::vector<int32_t>& tokens, int32_t bos,
                         int64_t max_tokens,
                         const std::function<void(int64_t, int64_t)>& progress = {});

// Reads and tokenizes a text file (with BOS), failing clearly when it is missing or empty.
std::vector<int32_t> tokenize_text_file(const Model& model, const std::string& path);

}  // namespace strata
