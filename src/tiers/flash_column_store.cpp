#include "tiers/flash_column_store.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace strata {

namespace {
// A pass of fewer columns than this costs more in per-pass overhead than the cache saves.
constexpr int64_t kMinPassColumns = 64;
}  // namespace

int64_t FlashColumnStore::capacity_for(int64_t count, double share, int64_t unit) {
  const auto wanted = static_cast<int64_t>(std::ceil(share * static_cast<double>(count)));
  return std::clamp<int64_t>(wanted, std::min(count, std::max(kMinPassColumns, unit)), count);
}

uint64_t FlashColumnStore::bytes(std::span<const ColumnBundleLayout> layers, double share) {
  uint64_t total = 0;
  for (const ColumnBundleLayout& l : layers) {
    const int64_t gu = capacity_for(l.n_embd, share, l.gate_up_pass_unit());
    const int64_t down = capacity_for(l.n_ff, share, l.down_pass_unit());
    total +=
        static_cast<uint64_t>(gu) * l.gate_up_bytes + static_cast<uint64_t>(down) * l.down_bytes +
        NeuronCache::bookkeeping_bytes(l.n_embd, gu) + NeuronCache::bookkeeping_bytes(l.n_ff, down);
  }
  return total;
}

FlashColumnStore::FlashColumnStore(std::vector<Layer> layers, BundleSource& source,
                                   ColumnStoreOptions options)
    : layers_(std::move(layers)), source_(source) {
  if (!(options.share > 0.0 && options.share <= 1.0))
    fail("the column caches' share must be in (0, 1], got {}", options.share);
  if (layers_.empty()) fail("a column store needs layers");
  for (const Layer& at : layers_)
    if (at.layout.groups() && (at.gate_up_scales == nullptr || at.down_scales == nullptr))
      fail("quantized column bundles need their layer's scale planes");
  const bool own_queue = source_.queue_depth() > 0;
  io_pool_ = std::make_unique<ThreadPool>(own_queue ? 1 : std::max(1, options.io_threads));
  const int depth = own_queue ? source_.queue_depth() : io_pool_->size();
  for (const Layer& at : layers_) {
    const ColumnBundleLayout& l = at.layout;
    auto& pair = caches_.emplace_back();
    pair[0] = std::make_unique<NeuronCache>(
        l.gate_up_cache(), capacity_for(l.n_embd, options.share, l.gate_up_pass_unit()),
        options.window);
    pair[1] = std::make_unique<NeuronCache>(
        l.down_cache(), capacity_for(l.n_ff, options.share, l.down_pass_unit()), options.window);
    for (auto& c : pair) c->set_read_planning(options.storage, depth);
  }
}

MatrixView FlashColumnStore::fetch(int64_t layer, Part part, std::span<const int32_t> ids,
                                   int32_t* slots, int64_t token, int pass, int64_t batch) {
  NeuronCache& c = cache(layer, part);
  const Layer& at = layers_[static_cast<size_t>(layer)];
  const ColumnBundleLayout& l = at.layout;
  const bool gate_up = part == Part::GateUp;
  c.fetch(ids, slots, source_, gate_up ? at.gate_up : at.down, token, *io_pool_, pass, batch);
  MatrixView v{gate_up ? l.type : l.down_type, c.data(), values(part), c.capacity(),
               gate_up ? l.gate_up_bytes : l.down_bytes};
  if (l.groups()) {
    v.layout = Layout::ColumnGroupSlots;
    v.scales = gate_up ? at.gate_up_scales : at.down_scales;
  }
  return v;
}

NeuronCacheStats FlashColumnStore::stats() const {
  NeuronCacheStats t;
  for (const auto& pair : caches_)
    for (const auto& c : pair) {
      const NeuronCacheStats& s = c->stats();
      t.hits += s.hits, t.misses += s.misses, t.bytes_read += s.bytes_read, t.reads += s.reads;
      t.read_seconds += s.read_seconds, t.evictions += s.evictions, t.pin_bytes += s.pin_bytes;
    }
  return t;
}

uint64_t FlashColumnStore::cache_bytes() const {
  uint64_t total = 0;
  for (const auto& pair : caches_)
    for (const auto& c : pair) total += c->bytes();
  return total;
}

}  // namespace strata
