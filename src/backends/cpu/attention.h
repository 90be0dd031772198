// Scaled dot-product attention on the CPU, flash style: the query heads of one KV head, for a run
// of consecutive tokens of one sequence, go over the cache a panel of kAttentionPanel positions
// at a time. Each panel's keys are transposed (and F16 values widened) once for all the run's
// rows and each row keeps an online softmax, so scores never leave the panel, the exponentials
// are vectorised, and a long prompt reads its cache once per run instead of once per token.
// The panel grid starts at the sequence's first cache row and a row's arithmetic depends only on
// the positions it sees, so a token gets the same bits alone (decode) as in any prompt batch, in
// any sequence slot, at any thread count.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/cpu/kernels.h"
#include "tensor/dtype.h"

namespace strata {

// Query heads per KV head that attention's callers provide room for.
inline constexpr int kMaxHeadsPerGroup = 256;
// Tokens attended together: their rows share each panel's transpose (16 tokens of a 4-head
// group: 64 rows a panel).
inline constexpr int kAttentionRunTokens = 16;

struct CachedHead {
  const void* k;  // cache row 0's key of this KV head
  const void* v;  // cache row 0's value
  // Element types: F32, F16, or a block type (Q8_0, Q4_0: llama.cpp's -ctk q8_0), whose rows are
  // dequantized a panel at a time.
  DType k_type = DType::F32, v_type = DType::F32;
  int64_t stride = 0;  // elements from one cache row to the next (whole blocks)
};

// One query head of one token and the cache rows it sees, [first, last].
struct QueryRow {
  const float* q;  // head_dim elements
  float* out;      // head_dim elements
  int64_t first, last;
  // An attention sink (gpt-oss): a logit in the softmax's denominator that carries no value;
  // -inf: none. The row's state starts from it (max = sink, sum = 1).
  float sink = -INFINITY;
};

// out = the softmax over p in [first, last] of (q . k_p * scale, soft-capped when softcap > 0)
// weighted sum of v_p, for every row; the panels are the rows origin + kAttentionPanel * i
// (origin: the rows' sequence's first cache row, at most every row's first).
void attend_rows(const CpuKernels& k, std::span<const QueryRow> rows, const CachedHead& kv,
                 int64_t origin, int64_t hd, float scale, float softcap = 0.0f);

// A batch's tokens in runs attended together: consecutive tokens with the same origin (the same
// sequence), at most max_tokens each.
struct TokenRun {
  int64_t begin, end;
};
std::vector<TokenRun> attention_runs(const int64_t* origin, int64_t n, int max_tokens);

}  // namespace strata
