#include "model/model.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "model/down_transpose.h"
#include "tensor/interleaved_rows.h"

namespace strata {

std::unique_ptr<Model> Model::load(const std::string& path, bool require_tokenizer, LoadMode mode) {
  auto m = std::make_unique<Model>();
  m->file = GgufFile::open(path, LoadMode::Map);
  const bool bundled = m->file->find(kBundleBytesKey) != nullptr;
  if (mode == LoadMode::Read && !bundled) m->file = GgufFile::open(path, mode);
  m->config = ModelConfig::from_gguf(*m->file);
  m->weights = load_weights(*m->file, m->config);
  if (mode == LoadMode::Read && bundled) {
    // A bundled file's FFN bundles are read on demand (flash tier) and its embedding rows one
    // per token (Session), never loaded whole; the rest is read into anonymous memory, which a
    // memory cgroup cannot evict the way it evicts mapped file pages under a tight budget.
    const MappedFile::Ranges holes = m->flash_ranges();
    m->file = GgufFile::open(path, mode, holes);
    m->weights = load_weights(*m->file, m->config);
  }
  m->sparsity = read_input_thresholds(*m->file, m->config);
  // "none" / "no_vocab" (llama.cpp's names) mark a file without a vocabulary, such as
  // strata synth's benchmark models.
  const std::string vocab = m->file->get_string("tokenizer.ggml.model", "");
  const bool has_vocab = !vocab.empty() && vocab != "none" && vocab != "no_vocab";
  if (require_tokenizer && !has_vocab)
    fail("'{}' has no tokenizer (tokenizer.ggml.model is {})", path,
         vocab.empty() ? "missing" : "'" + vocab + "'");
  if (has_vocab) {
    m->tokenizer = Tokenizer::from_gguf(*m->file);
    if (m->tokenizer->n_vocab() != m->config.n_vocab)
      fail("'{}': the tokenizer has {} tokens but the embedding has {} rows", path,
           m->tokenizer->n_vocab(), m->config.n_vocab);
  }
  return m;
}

int Model::adopt_layouts(const LayoutChoice& choose, bool dense_ffn) {
  std::vector<std::pair<MatrixView*, WeightUse>> all;
  const WeightUse ffn_use = dense_ffn ? WeightUse::Whole : WeightUse::Rows;
  for (LayerWeights& l : weights.layers) {
    for (MatrixView* m : {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output})
      all.emplace_back(m, WeightUse::Whole);
    if (!weights.bundled)
      for (MatrixView* m : {&l.ffn_gate, &l.ffn_up, &l.ffn_down}) all.emplace_back(m, ffn_use);
    for_each_expert_matrix(
        l, [&](MatrixView& m, const std::string&) { all.emplace_back(&m, ffn_use); });
    // Predictors are always multiplied whole. fc2's rows are short (rank elements: two Q4_0
    // blocks at rank 64), so one row at a time is mostly call overhead: 4.1-4.5 ms per token at
    // 7B for 17 MB of weights; 16 rows at a time 1.6-2.0 ms.
    for (MatrixView* m : {&l.predictor.fc1, &l.predictor.fc2})
      all.emplace_back(m, WeightUse::Whole);
  }
  if (!weights.tied_output) all.emplace_back(&weights.output, WeightUse::Whole);
  std::vector<MatrixView*> todo;
  const uint8_t* begin = file->bytes();
  const uint8_t* end = begin + file->file_size();
  for (auto [m, use] : all)
    if (m->data != nullptr && m->layout == Layout::Rows &&
        choose(*m, use) == Layout::Interleaved16 && m->data >= begin && m->data + m->bytes() <= end)
      todo.push_back(m);
  if (todo.empty() || !file->memory().set_writable()) return 0;
  for (MatrixView* m : todo) {
    interleave_rows16(m->type, file->memory().mutable_data() + (m->data - begin), m->rows, m->cols);
    m->layout = Layout::Interleaved16;
  }
  file->memory().set_read_only();
  return static_cast<int>(todo.size());
}

MappedFile::Ranges Model::flash_ranges() const {
  MappedFile::Ranges ranges;
  const ModelWeights& w = weights;
  if (!w.bundled) return ranges;
  const uint64_t layer_bytes = w.bundle.bundle_bytes * static_cast<uint64_t>(config.ffn_neurons());
  for (const LayerWeights& l : w.layers) ranges.push_back({l.bundles_offset, layer_bytes});
  if (w.token_embd.data != w.output.data)
    ranges.push_back(
        {static_cast<uint64_t>(w.token_embd.data - file->bytes()), w.token_embd.bytes()});
  return ranges;
}

namespace {

// The members of LayerColumns and the layer's matrices they transpose.
constexpr std::pair<MatrixView LayerColumns::*, MatrixView LayerMatrices::*> kColumnPairs[] = {
    {&LayerColumns::attn_q, &LayerMatrices::attn_q},
    {&LayerColumns::attn_k, &LayerMatrices::attn_k},
    {&LayerColumns::attn_v, &LayerMatrices::attn_v},
    {&LayerColumns::attn_output, &LayerMatrices::attn_output},
    {&LayerColumns::ffn_gate, &LayerMatrices::ffn_gate},
    {&LayerColumns::ffn_up, &LayerMatrices::ffn_up}};

}  // namespace

uint64_t Model::input_column_bytes(const LayerWeights& l) {
  uint64_t bytes = 0;
  for (auto [column, matrix] : kColumnPairs)
    if ((l.*matrix).data != nullptr) bytes += transposed_down_bytes(l.*matrix);
  if (l.ffn_down_t.data == nullptr && l.ffn_down.data != nullptr)
    bytes += transposed_down_bytes(l.ffn_down);
  return bytes;
}

uint64_t Model::ensure_input_columns() {
  if (config.moe()) fail("input-sparse products: mixtures of experts are not supported");
  if (!columns.empty()) return 0;
  uint64_t bytes = ensure_down_t();
  // Every matrix to transpose, each with its own storage; transposed by all cores at once
  // (a 7B model's are minutes on one).
  struct Task {
    const MatrixView* from;
    MatrixView* to;
  };
  std::vector<LayerColumns> made(weights.layers.size());
  std::vector<Task> tasks;
  for (size_t i = 0; i < weights.layers.size(); ++i)
    for (auto [column, matrix] : kColumnPairs) {
      const MatrixView& m = weights.layers[i].*matrix;
      if (m.data == nullptr) continue;
      if (m.layout != Layout::Rows)
        fail("input-sparse products transpose the file's rows, before any re-layout");
      tasks.push_back({&m, &(made[i].*column)});
    }
  // Moved into derived_ afterwards: a vector's move keeps its bytes where the views point.
  std::vector<std::vector<uint8_t>> storage(tasks.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (size_t t = next++; t < tasks.size(); t = next++)
        *tasks[t].to = transpose_down(*tasks[t].from, storage[t]);
    } catch (...) {  // the first failure, rethrown once every thread stopped
      next = tasks.size();
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  const unsigned n = std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
  for (unsigned i = 1; i < n; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  for (std::vector<uint8_t>& s : storage) {
    bytes += s.size();
    derived_.push_back(std::move(s));
  }
  columns = std::move(made);
  return bytes;
}

uint64_t Model::ensure_down_t() {
  uint64_t bytes = 0;
  for (LayerWeights& l : weights.layers) {
    if (l.ffn_down_t.data != nullptr) continue;
    derived_.emplace_back();
    if (l.experts.empty()) {
      l.ffn_down_t = transpose_down(l.ffn_down, derived_.back());
    } else {  // a mixture: every expert's neurons in one ffn_down_t (ModelConfig::ffn_neurons)
      std::vector<MatrixView> downs;
      for (const ExpertMatrices& e : l.experts) downs.push_back(e.down);
      l.ffn_down_t = transpose_expert_downs(downs, derived_.back());
    }
    bytes += derived_.back().size();
  }
  weights.has_down_t = true;
  return bytes;
}

}  // namespace strata
