#include "runtime/device_part.h"

#include <algorithm>

#include "runtime/ffn_executor.h"
#include "runtime/kv_cache.h"
#include "runtime/resident_weights.h"

namespace strata {

namespace {

std::unique_ptr<KvCache> make_kv(Backend& backend, const ModelConfig& c, const PartLayout& layout) {
  int64_t held = 0;
  for (uint8_t here : layout.layers) held += here != 0;
  if (held == 0) return nullptr;
  return std::make_unique<KvCache>(backend, c, layout.kv_positions, layout.k_type, layout.v_type,
                                   held);
}

// The CPU's attention needs no score scratch (at long contexts it is the largest buffer:
// 64 x n_head x n_ctx floats).
WorkspaceShape shape_on(const Backend& backend, WorkspaceShape shape) {
  shape.attention_scores = backend.device() != Device::Host;
  return shape;
}

std::vector<int64_t> kv_indices(const PartLayout& layout) {
  std::vector<int64_t> index;
  int64_t held = 0;
  for (uint8_t here : layout.layers) index.push_back(here != 0 ? held++ : -1);
  return index;
}

std::vector<uint8_t> others(const std::vector<uint8_t>& layers) {
  std::vector<uint8_t> not_here;
  for (uint8_t l : layers) not_here.push_back(l != 0 ? 0 : 1);
  return not_here;
}

}  // namespace

DevicePart::DevicePart(const Model& model, Backend& backend_in, FfnMode mode,
                       const PartLayout& layout, const WorkspaceShape& shape, int64_t max_batch)
    : backend(backend_in),
      layout_(layout),
      kv_(make_kv(backend_in, model.config, layout)),
      kv_index_(kv_indices(layout)),
      ws(backend_in, shape_on(backend_in, shape)),
      in(backend_in.make_prepared(max_batch)),
      model_(model),
      mode_(mode) {
  const ModelConfig& c = model.config;
  // A device gets the matrices of its own layers only; on the host every entry is a view.
  weights = std::make_unique<ResidentWeights>(model, backend, mode, layout_.ffn_rows,
                                              others(layout_.layers), !layout_.output,
                                              layout_.experts_held, layout_.columns);
  const int64_t counters = c.n_layer * kCountersPerLayer;
  counters_ = backend.allocate(static_cast<uint64_t>(counters) * sizeof(uint64_t),
                               "the FFN's counters");
  counts_.assign(static_cast<size_t>(counters), 0);
}

DevicePart::~DevicePart() {
  ffn.reset();  // it releases its buffers before the part's own
  backend.release(counters_);
}

FfnStore& DevicePart::ram_store() {
  if (ram_store_ == nullptr) {
    for (int64_t l = 0; l < model_.config.n_layer; ++l) {
      const ResidentLayer& r = weights->layer(l);
      ram_layers_.push_back({r.ffn_gate, r.ffn_up, r.ffn_down_t});
    }
    ram_store_ = std::make_unique<RamFfnStore>(ram_layers_);
  }
  return *ram_store_;
}

void DevicePart::make_ffn(FfnStore* store, bool check_predictor) {
  ffn = std::make_unique<FfnExecutor>(model_, *weights, backend, ws, *in, store, mode_,
                                      check_predictor);
}

KvLayer DevicePart::kv_layer(int64_t layer) const {
  return kv_->layer(kv_index_[static_cast<size_t>(layer)]);
}

uint64_t DevicePart::kv_bytes() const {
  return kv_ != nullptr ? kv_->bytes() : 0;
}

void DevicePart::copy_kv_rows(int64_t from, int64_t to, int64_t n) {
  if (kv_ != nullptr) kv_->copy_rows(from, to, n);
}

void DevicePart::collect_counts(std::vector<FfnLayerStats>& stats, InputSparsifier& sparsifier) {
  // Once per pass: the counters come back (after the logits' download) and start again at 0.
  const uint64_t bytes = counts_.size() * sizeof(uint64_t);
  backend.download(counts_.data(), counters_.data, bytes);
  for (size_t l = 0; l < stats.size(); ++l) {
    const uint64_t* at = counts_.data() + l * kCountersPerLayer;
    stats[l].nonzero += at[0];
    sparsifier.add_kept(static_cast<int64_t>(l), at + 1);
  }
  std::fill(counts_.begin(), counts_.end(), 0);
  backend.upload(counters_.data, counts_.data(), bytes);
}

}  // namespace strata
