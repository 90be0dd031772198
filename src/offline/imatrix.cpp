#include "offline/imatrix.h"

#include <fmt/format.h>

#include "core/error.h"
#include "format/gguf.h"
#include "model/input_thresholds.h"
#include "offline/text_windows.h"
#include "runtime/input_sparsifier.h"
#include "runtime/session.h"

namespace strata {

std::vector<std::string> matrices_reading(int point, int64_t layer) {
  std::vector<const char*> names;
  switch (static_cast<MatrixInput>(point)) {
    case MatrixInput::Attention:
      names = {"attn_q", "attn_k", "attn_v", "attn_qkv"};
      break;
    case MatrixInput::AttentionOutput:
      names = {"attn_output"};
      break;
    case MatrixInput::Ffn:
      names = {"ffn_gate", "ffn_up"};
      break;
    case MatrixInput::FfnHidden:
      names = {"ffn_down"};
      break;
  }
  std::vector<std::string> out;
  for (const char* n : names) out.push_back(fmt::format("blk.{}.{}.weight", layer, n));
  return out;
}

Imatrix collect_imatrix(const Model& model, const std::vector<int32_t>& tokens,
                        const ImatrixOptions& o, ThreadPool& pool,
                        const std::function<void(int64_t, int64_t)>& progress) {
  const ModelConfig& c = model.config;
  if (c.moe())
    fail(
        "strata imatrix: '{}' is a mixture of experts, whose inputs are per expert: not "
        "collected yet (llama-imatrix writes them)",
        model.file->path());
  SessionOptions options;
  options.ffn = FfnMode::Dense;
  Session session(model, o.n_ctx, pool, options);
  // Per layer and point: the column sums of squares, in double, and the rows seen.
  std::vector<std::vector<std::vector<double>>> sums(
      static_cast<size_t>(c.n_layer), std::vector<std::vector<double>>(kMatrixInputs));
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(c.n_layer),
                                         std::vector<int64_t>(kMatrixInputs, 0));
  session.set_input_observer([&](int64_t l, int point, int64_t n, int64_t width, const float* x) {
    if (point >= kMatrixInputs) return;  // the gate's values (CATS) are no matrix's input
    std::vector<double>& s = sums[static_cast<size_t>(l)][static_cast<size_t>(point)];
    s.resize(static_cast<size_t>(width), 0.0);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < width; ++i)
        s[static_cast<size_t>(i)] += double{x[b * width + i]} * x[b * width + i];
    rows[static_cast<size_t>(l)][static_cast<size_t>(point)] += n;
  });
  const int32_t bos =
      model.tokenizer && model.tokenizer->add_bos_default() ? model.tokenizer->bos() : -1;
  const int64_t read = run_text_windows(session, tokens, bos, o.max_tokens, progress);
  session.set_input_observer({});

  Imatrix m;
  m.datasets = {o.dataset};
  m.chunk_size = o.n_ctx;
  m.chunk_count = (read + o.n_ctx - 1) / o.n_ctx;
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (int p = 0; p < kMatrixInputs; ++p) {
      const std::vector<double>& s = sums[static_cast<size_t>(l)][static_cast<size_t>(p)];
      if (s.empty()) continue;
      for (const std::string& name : matrices_reading(p, l)) {
        const GgufTensorInfo* t = model.file->find_tensor(name);
        if (t == nullptr || t->dims.size() != 2 || t->dims[0] != static_cast<int64_t>(s.size()))
          continue;
        ImatrixEntry e;
        e.sums.assign(s.begin(), s.end());
        e.counts = {static_cast<float>(rows[static_cast<size_t>(l)][static_cast<size_t>(p)])};
        m.entries[name] = std::move(e);
      }
    }
  return m;
}

}  // namespace strata
