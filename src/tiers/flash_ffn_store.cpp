#include "tiers/flash_ffn_store.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace strata {

FlashFfnStore::FlashFfnStore(const BundleLayout& layout, int64_t n_embd,
                             std::vector<uint64_t> offsets, BundleSource& source,
                             FlashStoreOptions options)
    : layout_(layout),
      n_embd_(n_embd),
      offsets_(std::move(offsets)),
      source_(source),
      options_(std::move(options)) {
  const size_t layers = offsets_.size();
  if (options_.slots.size() != layers)
    fail("neuron cache slots for {} layers given, the model has {}", options_.slots.size(), layers);
  for (size_t l = 0; l < layers; ++l)
    caches_.push_back(std::make_unique<NeuronCache>(layout_, options_.slots[l], options_.window,
                                                    options_.keeps_data));
  // Blocking reads need threads to be in flight together; io_uring keeps its own queue.
  const bool own_queue = source_.queue_depth() > 0;
  io_pool_ = std::make_unique<ThreadPool>(own_queue ? 1 : std::max(1, options_.io_threads));
  const int depth = own_queue ? source_.queue_depth() : io_pool_->size();
  for (auto& cache : caches_) cache->set_read_planning(options_.storage, depth);
  if (!options_.pinned.empty()) {
    if (options_.pinned.size() != layers)
      fail("pinned neurons for {} layers given, the model has {}", options_.pinned.size(), layers);
    for (size_t l = 0; l < layers; ++l)
      if (!options_.pinned[l].empty())
        caches_[l]->pin(options_.pinned[l], source_, offsets_[l], *io_pool_);
  }
  slots_.resize(static_cast<size_t>(layout_.n_ff));
}

FlashFfnStore::~FlashFfnStore() {
  finish_prefetch();
}

NeuronCacheStats FlashFfnStore::stats() const {
  NeuronCacheStats t;
  for (const auto& c : caches_) {
    const NeuronCacheStats& s = c->stats();
    t.hits += s.hits, t.misses += s.misses, t.bytes_read += s.bytes_read, t.reads += s.reads;
    t.read_seconds += s.read_seconds, t.evictions += s.evictions, t.pin_bytes += s.pin_bytes;
  }
  return t;
}

MatrixView FlashFfnStore::view(const NeuronCache& cache, uint64_t offset) const {
  // The cache's buffer as a matrix whose rows are slots (stride: one bundle).
  const uint8_t* data = cache.data() == nullptr ? nullptr : cache.data() + offset;  // no data
  return MatrixView{layout_.type, data, n_embd_, cache.capacity(), layout_.bundle_bytes};
}

template <class Work>
void FlashFfnStore::recorded(const NeuronCache& cache, int64_t layer, bool ahead, Work&& work) {
  if (timeline_ == nullptr) {
    work();
    return;
  }
  const NeuronCacheStats before = cache.stats();
  const double start = timeline_->now();
  work();
  const double end = timeline_->now();
  const NeuronCacheStats& after = cache.stats();
  // A fetch does its bookkeeping, then waits for its reads (read_seconds).
  const double reading = std::min(end - start, after.read_seconds - before.read_seconds);
  if (after.reads > before.reads)
    timeline_->read(layer, ahead, end - reading, end, after.bytes_read - before.bytes_read,
                    after.reads - before.reads);
  if (ahead) return;
  timeline_->span(TimelinePart::CacheLookup, layer, start, end - reading);
  if (reading > 0) timeline_->span(TimelinePart::ReadWait, layer, end - reading, end);
}

void FlashFfnStore::finish_prefetch() {
  if (prefetch_layer_ < 0) return;
  const int64_t layer = prefetch_layer_;
  prefetch_layer_ = -1;
  NeuronCache& cache = *caches_[static_cast<size_t>(layer)];
  const double start = timeline_now(timeline_);
  try {
    if (source_.asynchronous()) {
      const BundleSource::Clock::time_point landed = cache.settle();
      if (timeline_ != nullptr && prefetch_reads_ > 0)
        timeline_->read(layer, true, prefetch_issued_, timeline_->at(landed), prefetch_bytes_,
                        prefetch_reads_);
    } else {
      transfers_.wait(prefetch_ticket_);
    }
  } catch (const std::exception&) {
    // A failed guess is harmless: the layer's own fetch reads again and reports failures.
  }
  timeline_span(timeline_, TimelinePart::ReadWait, layer, start);
}

void FlashFfnStore::prefetch(int64_t layer, std::span<const int32_t> ids, int64_t token) {
  finish_prefetch();
  NeuronCache& cache = *caches_[static_cast<size_t>(layer)];
  prefetch_ids_.assign(ids.begin(), ids.end());
  if (static_cast<int64_t>(prefetch_ids_.size()) > cache.capacity())
    prefetch_ids_.resize(static_cast<size_t>(cache.capacity()));
  prefetch_slots_.resize(prefetch_ids_.size());
  const uint64_t offset = offsets_[static_cast<size_t>(layer)];
  prefetch_layer_ = layer;
  if (source_.asynchronous()) {
    // Issued from this thread: a helper thread would wait for a core while the products run.
    const NeuronCacheStats before = cache.stats();
    prefetch_issued_ = timeline_now(timeline_);
    try {
      cache.fetch_ahead(prefetch_ids_, prefetch_slots_.data(), source_, offset, token, *io_pool_);
    } catch (const std::exception&) {
      prefetch_layer_ = -1;  // a failed guess is harmless (the layer's fetch reports it)
    }
    prefetch_bytes_ = cache.stats().bytes_read - before.bytes_read;
    prefetch_reads_ = cache.stats().reads - before.reads;
    return;
  }
  prefetch_ticket_ = transfers_.submit([this, &cache, offset, token, layer] {
    recorded(cache, layer, true, [&] {
      cache.fetch(cache.fitting(prefetch_ids_, token), prefetch_slots_.data(), source_, offset,
                  token, *io_pool_);
    });
  });
}

void FlashFfnStore::cached_first(NeuronCache& cache) {
  // Several passes: the neurons already in the cache go first, so a prompt batch larger than
  // the cache reuses what the previous batch left instead of cycling through it (plain
  // ascending order would evict every neuron just before it is needed again). The per-token
  // need moves with its neurons.
  const int64_t n_ids = list_.count, n = list_.tokens, stride = list_.need_stride;
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(n_ids));
  for (int64_t k = 0; k < n_ids; ++k)
    if (cache.slot_of(list_.ids[k]) >= 0) order.push_back(k);
  for (int64_t k = 0; k < n_ids; ++k)
    if (cache.slot_of(list_.ids[k]) < 0) order.push_back(k);
  reordered_ids_.resize(static_cast<size_t>(n_ids));
  reordered_need_.resize(static_cast<size_t>(n * n_ids));
  for (int64_t k = 0; k < n_ids; ++k) {
    reordered_ids_[static_cast<size_t>(k)] = list_.ids[order[static_cast<size_t>(k)]];
    for (int64_t b = 0; b < n; ++b)
      reordered_need_[static_cast<size_t>(b * n_ids + k)] =
          list_.need[b * stride + order[static_cast<size_t>(k)]];
  }
  std::copy(reordered_ids_.begin(), reordered_ids_.end(), list_.ids);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < n_ids; ++k)
      list_.need[b * stride + k] = reordered_need_[static_cast<size_t>(b * n_ids + k)];
}

void FlashFfnStore::begin(int64_t layer, NeuronList& list, int64_t token) {
  if (prefetch_layer_ == layer) finish_prefetch();  // its reads are done now
  layer_ = layer;
  token_ = token;
  list_ = list;
  end_ = 0;
  pass_ = 0;
  NeuronCache& cache = *caches_[static_cast<size_t>(layer)];
  int64_t unpinned = list.count;
  if (cache.pinned() > 0)
    for (int64_t k = 0; k < list.count; ++k) unpinned -= cache.is_pinned(list.ids[k]);
  if (unpinned > cache.capacity() - cache.pinned()) cached_first(cache);
}

bool FlashFfnStore::next(FfnSegment& s) {
  if (end_ >= list_.count && (pass_ > 0 || list_.count > 0)) return false;
  // One reader of the source at a time (a later pass after a look-ahead); an asynchronous
  // source is read by this thread alone, and its look-ahead settles when its layer begins.
  if (!source_.asynchronous()) finish_prefetch();
  source_.poll();  // notes look-ahead reads that have landed (the timeline's end of them)
  NeuronCache& cache = *caches_[static_cast<size_t>(layer_)];
  const int64_t begin = end_, room = cache.capacity() - cache.pinned();
  // A pass takes neurons in order while the unpinned ones fit in the room (pinned ones are
  // always resident).
  for (int64_t free = room; end_ < list_.count; ++end_) {
    if (cache.pinned() > 0 && cache.is_pinned(list_.ids[end_])) continue;
    if (free == 0) break;
    --free;
  }
  if (end_ == begin && end_ < list_.count)  // would serve nothing, pass after pass
    fail("layer {}'s neuron cache ({} slots, {} pinned) has no room for the neurons a token needs",
         layer_, cache.capacity(), cache.pinned());
  const std::span<const int32_t> part(list_.ids + begin, static_cast<size_t>(end_ - begin));
  const bool split = options_.split_reads && layout_.head_bytes() < layout_.bundle_bytes;
  recorded(cache, layer_, false, [&] {
    cache.fetch(part, slots_.data() + begin, source_, offsets_[static_cast<size_t>(layer_)], token_,
                *io_pool_, static_cast<int>(pass_), list_.tokens, split ? layout_.head_bytes() : 0);
  });
  s = FfnSegment{Device::Host,
                 view(cache, layout_.gate_offset()),
                 view(cache, layout_.up_offset()),
                 view(cache, layout_.down_offset()),
                 std::span<const int32_t>(slots_.data() + begin, part.size()),
                 part,
                 begin,
                 end_,
                 split};
  ++pass_;
  return true;
}

void FlashFfnStore::refine(FfnSegment& s, std::span<const int32_t> active) {
  if (!source_.asynchronous()) finish_prefetch();
  NeuronCache& cache = *caches_[static_cast<size_t>(layer_)];
  recorded(cache, layer_, false, [&] {
    cache.complete(active, source_, offsets_[static_cast<size_t>(layer_)], *io_pool_);
  });
  for (int64_t k = s.begin; k < s.end; ++k) {  // slots moved; dropped neurons: any slot
    const int32_t slot = cache.slot_of(list_.ids[k]);
    slots_[static_cast<size_t>(k)] = slot >= 0 ? slot : 0;
  }
  s.partial = false;
}

NeuronRowShapes FlashFfnStore::row_shapes(int64_t) const {
  const MatrixView row{layout_.type, nullptr, n_embd_, layout_.n_ff, layout_.row_bytes};
  return {layout_.has_gate, row, row, row};
}

void FlashFfnStore::copy_rows(int64_t layer, std::span<const int32_t> ids, uint8_t* gate,
                              uint8_t* up, uint8_t* down_t) {
  const uint64_t bundle = layout_.bundle_bytes, row = layout_.row_bytes;
  finish_prefetch();
  const uint64_t staging_bytes = copy_staging_bytes(bundle);
  const size_t chunk = static_cast<size_t>(staging_bytes / bundle);
  // O_DIRECT reads need aligned memory.
  std::unique_ptr<uint8_t, decltype(&std::free)> staging(
      static_cast<uint8_t*>(std::aligned_alloc(kBundleAlign, staging_bytes)), &std::free);
  if (staging == nullptr) fail("cannot allocate {} bytes to copy neuron bundles", staging_bytes);
  const uint64_t base = offsets_[static_cast<size_t>(layer)];
  std::vector<ReadRequest> reads;
  for (size_t start = 0; start < ids.size(); start += chunk) {
    const size_t end = std::min(ids.size(), start + chunk);
    reads.clear();
    for (size_t k = start; k < end; ++k) {
      uint8_t* dst = staging.get() + (k - start) * bundle;
      if (k > start && ids[k] == ids[k - 1] + 1)
        reads.back().bytes += bundle;  // adjacent on flash and in the staging: one read
      else
        reads.push_back({dst, bundle, base + static_cast<uint64_t>(ids[k]) * bundle});
    }
    source_.read_batch(reads, *io_pool_);
    for (size_t k = start; k < end; ++k) {
      const uint8_t* b = staging.get() + (k - start) * bundle;
      if (layout_.has_gate) std::memcpy(gate + k * row, b + layout_.gate_offset(), row);
      std::memcpy(up + k * row, b + layout_.up_offset(), row);
      std::memcpy(down_t + k * row, b + layout_.down_offset(), row);
    }
  }
}

}  // namespace strata
