#include "model/model.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "model/column_group_copy.h"
#include "model/down_transpose.h"
#include "tensor/interleaved_rows.h"

namespace strata {

std::unique_ptr<Model> Model::load(const std::string& path, bool require_tokenizer, LoadMode mode) {
  auto m = std::make_unique<Model>();
  m->file = GgufFile::open(path, LoadMode::Map);
  const bool bundled =
      m->file->find(kBundleBytesKey) != nullptr || m->file->find(kColumnBundleKindKey) != nullptr;
  if (mode == LoadMode::Read && !bundled) m->file = GgufFile::open(path, mode);
  m->config = ModelConfig::from_gguf(*m->file);
  m->weights = load_weights(*m->file, m->config);
  if (mode == LoadMode::Read && bundled) {
    // A bundled file's FFN bundles (neuron or column bundles) are read on demand (flash tier)
    // and its embedding rows one per token (Session), never loaded whole; the rest is read into
    // anonymous memory, which a memory cgroup cannot evict the way it evicts mapped file pages
    // under a tight budget.
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
  // Token ids need no tokenizer (strata logits): a vocabulary strata cannot read (llama.cpp's
  // test models name theirs "test") is then left unread, and said.
  if (has_vocab && !require_tokenizer && !tokenizer_supported(vocab)) {
    m->weights.notes.push_back(fmt::format(
        "tokenizer model '{}' is not one strata reads; token ids only", vocab.substr(0, 32)));
  } else if (has_vocab) {
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
  if (!w.bundled && !w.column_bundled) return ranges;
  const uint64_t layer_bytes = w.bundle.bundle_bytes * static_cast<uint64_t>(config.ffn_neurons());
  for (const LayerWeights& l : w.layers) {
    if (w.bundled) ranges.push_back({l.bundles_offset, layer_bytes});
    if (!w.column_bundled) continue;
    const ColumnBundleLayout& cb = l.column_bundle;
    ranges.push_back({l.gate_up_columns_offset, cb.gate_up_layer_bytes()});
    ranges.push_back({l.down_columns_offset, cb.down_layer_bytes()});
  }
  if (w.token_embd.data != w.output.data)
    ranges.push_back(
        {static_cast<uint64_t>(w.token_embd.data - file->bytes()), w.token_embd.bytes()});
  return ranges;
}

namespace {

// The members of LayerColumns and the layer's matrices they transpose, grouped by the input
// they read: a group's parts are fused into `fused` where they can be. `groups_only`: the copy
// is made only as column groups (ffn_down's float copy is the layer's ffn_down_t).
struct ColumnPart {
  MatrixView LayerColumns::*column;
  MatrixView LayerMatrices::*matrix;
};
struct ColumnGroup {
  MatrixView LayerColumns::*fused;  // null: never fused
  std::array<ColumnPart, 3> parts;
  int n_parts;
  bool groups_only = false;
};
constexpr ColumnGroup kColumnGroups[] = {
    {&LayerColumns::attn_qkv,
     {{{&LayerColumns::attn_q, &LayerMatrices::attn_q},
       {&LayerColumns::attn_k, &LayerMatrices::attn_k},
       {&LayerColumns::attn_v, &LayerMatrices::attn_v}}},
     3},
    {nullptr, {{{&LayerColumns::attn_output, &LayerMatrices::attn_output}}}, 1},
    {&LayerColumns::ffn_gate_up,
     {{{&LayerColumns::ffn_gate, &LayerMatrices::ffn_gate},
       {&LayerColumns::ffn_up, &LayerMatrices::ffn_up}}},
     2},
    {nullptr, {{{&LayerColumns::ffn_down, &LayerMatrices::ffn_down}}}, 1, true}};

// How the matrices that read one input (stacked) are copied for input-sparse products: float
// rows transposed (model/down_transpose.h), Q8_0 and K-quant rows as column groups
// (model/column_group_copy.h), or not at all (their products stay row-major).
enum class CopyKind { None, Transposed, Groups };

CopyKind copy_kind(std::span<const MatrixView> parts, bool groups_only) {
  if (column_groups_apply(parts)) return CopyKind::Groups;
  if (!groups_only && column_copies_fuse(parts) &&
      column_products_pay(transposed_down_type(parts[0])))
    return CopyKind::Transposed;
  return CopyKind::None;
}

std::vector<MatrixView> group_parts(const LayerWeights& l, const ColumnGroup& g) {
  std::vector<MatrixView> parts;
  for (int i = 0; i < g.n_parts; ++i) parts.push_back(l.*g.parts[static_cast<size_t>(i)].matrix);
  return parts;
}

// The group's copies as (member, parts) pairs: one fused copy where it can be, else one per part.
std::vector<std::pair<MatrixView LayerColumns::*, std::vector<MatrixView>>> group_copies(
    const LayerWeights& l, const ColumnGroup& g) {
  const std::vector<MatrixView> parts = group_parts(l, g);
  if (g.fused != nullptr && copy_kind(parts, g.groups_only) != CopyKind::None)
    return {{g.fused, parts}};
  std::vector<std::pair<MatrixView LayerColumns::*, std::vector<MatrixView>>> copies;
  for (int i = 0; i < g.n_parts; ++i)
    if (copy_kind(std::span(&parts[static_cast<size_t>(i)], 1), g.groups_only) != CopyKind::None)
      copies.push_back({g.parts[static_cast<size_t>(i)].column, {parts[static_cast<size_t>(i)]}});
  return copies;
}

uint64_t copy_bytes(std::span<const MatrixView> parts, CopyKind kind) {
  if (kind == CopyKind::Groups) return column_groups_copy_bytes(parts);
  uint64_t bytes = 0;
  for (const MatrixView& m : parts) bytes += transposed_down_bytes(m);
  return bytes;
}

// `v` copied into huge-page memory appended to `storage`; the copy's view.
MatrixView into_pages(MatrixView v, std::vector<AnonymousMemory>& storage) {
  AnonymousMemory pages(std::max<uint64_t>(v.bytes(), 1));  // throws std::bad_alloc
  std::memcpy(pages.data(), v.data, static_cast<size_t>(v.bytes()));
  v.data = pages.data();
  storage.push_back(std::move(pages));
  return v;
}

// The transposed float parts as one copy (each input's row the parts' rows back to back).
MatrixView transposed_copy(std::span<const MatrixView> parts,
                           std::vector<AnonymousMemory>& storage) {
  if (parts.size() == 1) {
    std::vector<uint8_t> bytes;
    return into_pages(transpose_down(parts[0], bytes), storage);
  }
  std::vector<MatrixView> transposed;
  std::vector<std::vector<uint8_t>> part_bytes(parts.size());
  MatrixView fused{};
  for (size_t i = 0; i < parts.size(); ++i) {
    transposed.push_back(transpose_down(parts[i], part_bytes[i]));
    fused.type = transposed.back().type;
    fused.rows = transposed.back().rows;  // the inputs
    fused.cols += transposed.back().cols;
    fused.row_bytes += transposed.back().row_bytes;
  }
  storage.emplace_back(std::max<uint64_t>(fused.bytes(), 1));  // throws std::bad_alloc
  fused.data = storage.back().data();
  for (int64_t j = 0; j < fused.rows; ++j) {
    uint8_t* row = storage.back().data() + static_cast<uint64_t>(j) * fused.row_bytes;
    for (const MatrixView& part : transposed) {
      std::memcpy(row, part.row(j), static_cast<size_t>(part.row_bytes));
      row += part.row_bytes;
    }
  }
  return fused;
}

// Copies group g of layer l into `out`, its bytes appended to `storage`.
void transpose_group(const LayerWeights& l, const ColumnGroup& g, LayerColumns& out,
                     std::vector<AnonymousMemory>& storage) {
  for (const MatrixView& m : group_parts(l, g))
    if (m.data != nullptr && m.layout != Layout::Rows)
      fail("input-sparse products transpose the file's rows, before any re-layout");
  for (const auto& [member, parts] : group_copies(l, g)) {
    if (copy_kind(parts, g.groups_only) == CopyKind::Groups) {
      storage.emplace_back(std::max<uint64_t>(column_groups_copy_bytes(parts), 1));
      out.*member = build_column_groups(parts, storage.back().data());
    } else {
      out.*member = transposed_copy(parts, storage);
    }
  }
}

// Whether ensure_down_t's copy of this layer's ffn_down would serve input-sparse products.
bool built_down_pays(const LayerWeights& l) {
  return l.ffn_down.data != nullptr && column_products_pay(transposed_down_type(l.ffn_down));
}

}  // namespace

uint64_t Model::input_column_bytes(const LayerWeights& l) {
  uint64_t bytes = 0;
  for (const ColumnGroup& g : kColumnGroups)
    for (const auto& [member, parts] : group_copies(l, g))
      bytes += copy_bytes(parts, copy_kind(parts, g.groups_only));
  if (l.ffn_down_t.data == nullptr && built_down_pays(l))
    bytes += transposed_down_bytes(l.ffn_down);
  return bytes;
}

uint64_t Model::column_copies_bytes(const LayerWeights& l) {
  uint64_t bytes = input_column_bytes(l);
  // The float ffn_down_t the copies name as their down projection's (input_column_bytes counts
  // only one built for them).
  if (l.ffn_down_t.data != nullptr && column_products_pay(l.ffn_down_t.type))
    bytes += l.ffn_down_t.bytes();
  return bytes;
}

uint64_t Model::ensure_input_columns() {
  if (config.moe()) fail("input-sparse products: mixtures of experts are not supported");
  if (!columns.empty()) return 0;
  // ffn_down_t is the down projection's column copy: built only where every copy it would
  // build pays (input_column_bytes counts those that do: never less than is built).
  const bool build_down = std::all_of(
      weights.layers.begin(), weights.layers.end(),
      [](const LayerWeights& l) { return l.ffn_down_t.data != nullptr || built_down_pays(l); });
  uint64_t bytes = build_down ? ensure_down_t() : 0;
  // Every layer's groups to transpose, each task with its own storage; transposed by all
  // cores at once (a 7B model's are minutes on one).
  struct Task {
    size_t layer;
    const ColumnGroup* group;
  };
  std::vector<LayerColumns> made(weights.layers.size());
  std::vector<Task> tasks;
  for (size_t i = 0; i < weights.layers.size(); ++i)
    for (const ColumnGroup& g : kColumnGroups) tasks.push_back({i, &g});
  // Moved into derived_ afterwards: a move keeps the bytes where the views point.
  std::vector<std::vector<AnonymousMemory>> storage(tasks.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (size_t t = next++; t < tasks.size(); t = next++)
        transpose_group(weights.layers[tasks[t].layer], *tasks[t].group, made[tasks[t].layer],
                        storage[t]);
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
  for (std::vector<AnonymousMemory>& task : storage)
    for (AnonymousMemory& pages : task) {
      bytes += pages.size();
      derived_.push_back(std::move(pages));
    }
  for (size_t i = 0; i < made.size(); ++i)
    if (made[i].ffn_down.data == nullptr && weights.layers[i].ffn_down_t.data != nullptr &&
        column_products_pay(weights.layers[i].ffn_down_t.type))
      made[i].ffn_down = weights.layers[i].ffn_down_t;
  columns = std::move(made);
  return bytes;
}

uint64_t Model::ensure_down_t() {
  uint64_t bytes = 0;
  for (LayerWeights& l : weights.layers) {
    if (l.ffn_down_t.data != nullptr) continue;
    // A mixture's leading dense layer: its FFN is the always-used expert, which the sparse modes
    // (that read ffn_down_t) refuse.
    if (l.experts.empty() && l.ffn_down.data == nullptr) continue;
    std::vector<uint8_t> built;
    if (l.experts.empty()) {
      l.ffn_down_t = into_pages(transpose_down(l.ffn_down, built), derived_);
    } else {  // a mixture: every expert's neurons in one ffn_down_t (ModelConfig::ffn_neurons)
      std::vector<MatrixView> downs;
      for (const ExpertMatrices& e : l.experts) downs.push_back(e.down);
      l.ffn_down_t = into_pages(transpose_expert_downs(downs, built), derived_);
    }
    bytes += derived_.back().size();
  }
  weights.has_down_t = true;
  return bytes;
}

}  // namespace strata
