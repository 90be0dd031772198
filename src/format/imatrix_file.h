// llama-imatrix's importance matrices, in both of llama.cpp v0.5.0's formats: GGUF (general.type
// "imatrix"; per matrix "<tensor>.in_sum2", the sums of its inputs' squares per column and
// expert, and "<tensor>.counts", the tokens counted per expert; imatrix.datasets,
// .chunk_count, .chunk_size) and the legacy ".dat" (i32 entry count; per entry i32 name length,
// name, i32 calls, i32 values, f32 values already divided by the calls' tokens and times the
// calls; then optionally i32 chunk count, i32 length and the dataset's name). strata reads both
// and writes GGUF, as llama-imatrix does by default.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace strata {

struct ImatrixEntry {
  std::vector<float> sums;    // n_matrices x columns (one matrix, or one per expert)
  std::vector<float> counts;  // per matrix: tokens (GGUF) or calls (legacy)
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight tensor name
  std::vector<std::string> datasets;
  int64_t chunk_count = 0, chunk_size = 0;
  bool legacy = false;

  // What llama-quantize weighs a tensor's values by (its load_imatrix): per matrix the sums over
  // the count (1 where nothing was counted); legacy files' sums over their calls. Empty when the
  // file has no entry for the tensor.
  std::vector<float> importance(const std::string& tensor) const;
};

// Either format, told apart by the GGUF magic; a malformed file fails naming what is wrong.
Imatrix read_imatrix(const std::string& path);
void write_imatrix(const std::string& path, const Imatrix& imatrix);
// The legacy format (llama-imatrix --output-format dat): one count per matrix, so a mixture's
// per-expert entries are refused; the calls recorded are the chunk count.
void write_imatrix_legacy(const std::string& path, const Imatrix& imatrix);

}  // namespace strata
