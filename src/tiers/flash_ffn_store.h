// The flash tier as an FFN store: per layer a RAM neuron cache (neuron_cache.h) in front of the
// bundles on flash. A layer's neurons are served in passes of at most the cache's room: with
// one pass (the usual case) one segment whose rows are cache slots; a batch needing more
// neurons than fit gets several, the neurons already cached first. Look-ahead reads go through
// one persistent transfer queue.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "core/timeline.h"
#include "tiers/bundle_source.h"
#include "tiers/ffn_store.h"
#include "tiers/neuron_cache.h"
#include "tiers/storage_profile.h"
#include "tiers/transfer_queue.h"

namespace strata {

struct FlashStoreOptions {
  std::vector<int64_t> slots;  // per layer: cache slots (<= n_ff)
  int window = 5;
  int io_threads = 16;  // pread threads: reads in flight (io_uring keeps its own queue)
  const StorageProfile* storage = nullptr;
  bool split_reads = false;  // deciding row first (ReLU-family models only; the caller checks)
  std::vector<std::vector<int32_t>> pinned;  // per layer, sorted; empty: none
  // False: the caches' bookkeeping alone, nothing read (what a run would read is counted:
  // the placement plan's replay, planning/plan_replay.h).
  bool keeps_data = true;
};

class FlashFfnStore final : public FfnStore {
 public:
  // `offsets`: each layer's first bundle in the source.
  FlashFfnStore(const BundleLayout& layout, int64_t n_embd, std::vector<uint64_t> offsets,
                BundleSource& source, FlashStoreOptions options);
  ~FlashFfnStore() override;

  const char* name() const override { return "flash"; }
  void begin(int64_t layer, NeuronList& list, int64_t token) override;
  bool next(FfnSegment& segment) override;
  void refine(FfnSegment& segment, std::span<const int32_t> active) override;
  bool can_prefetch() const override { return true; }
  void prefetch(int64_t layer, std::span<const int32_t> ids, int64_t token) override;
  // Reads the neurons' bundles from flash (a few MiB at a time, adjacent ones in one read),
  // past the caches: a device's hot set is loaded once and never served from them.
  NeuronRowShapes row_shapes(int64_t layer) const override;
  void copy_rows(int64_t layer, std::span<const int32_t> ids, uint8_t* gate, uint8_t* up,
                 uint8_t* down_t) override;
  // Bytes copy_rows holds while it reads (at most kCopyBytes of bundles, at least one).
  static uint64_t copy_staging_bytes(uint64_t bundle_bytes) {
    return std::max<uint64_t>(kCopyBytes / bundle_bytes, 1) * bundle_bytes;
  }
  static constexpr uint64_t kCopyBytes = uint64_t{2} << 20;

  const std::vector<std::unique_ptr<NeuronCache>>& caches() const { return caches_; }
  // Bytes of the store's own lists for a model of n_ff neurons and batches of `batch` tokens
  // (its caches' bookkeeping is NeuronCache::bookkeeping_bytes).
  static uint64_t bookkeeping_bytes(int64_t n_ff, int64_t batch) {
    return static_cast<uint64_t>(n_ff) * (4 + 4 + 4 + 4) + static_cast<uint64_t>(batch * n_ff);
  }
  NeuronCacheStats stats() const;  // summed over layers
  // Records the store's lookups, waits and reads (null: none).
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

 private:
  void cached_first(NeuronCache& cache);  // multi-pass lists: cached neurons to the front
  void finish_prefetch();
  // Runs `work` (a fetch or completion in `cache`) and records it on the timeline: the
  // bookkeeping before its reads, the reads, and (on the main thread) the wait for them.
  template <class Work>
  void recorded(const NeuronCache& cache, int64_t layer, bool ahead, Work&& work);
  MatrixView view(const NeuronCache& cache, uint64_t offset) const;

  BundleLayout layout_;
  int64_t n_embd_;
  std::vector<uint64_t> offsets_;
  BundleSource& source_;
  FlashStoreOptions options_;
  std::vector<std::unique_ptr<NeuronCache>> caches_;
  std::unique_ptr<ThreadPool> io_pool_;
  TransferQueue transfers_;
  // The layer being served.
  int64_t layer_ = 0, token_ = 0, end_ = 0, pass_ = 0;
  NeuronList list_;
  std::vector<int32_t> slots_, reordered_ids_;
  std::vector<uint8_t> reordered_need_;
  // Look-ahead in flight: its layer (-1: none), ticket (a transfer-queue job where the source
  // is not asynchronous), when it was issued (timeline) and buffers.
  int64_t prefetch_layer_ = -1;
  TransferQueue::Ticket prefetch_ticket_ = 0;
  double prefetch_issued_ = 0;
  uint64_t prefetch_bytes_ = 0, prefetch_reads_ = 0;
  std::vector<int32_t> prefetch_ids_, prefetch_slots_;
  Timeline* timeline_ = nullptr;
};

}  // namespace strata
