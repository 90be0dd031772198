// One layer's RAM cache of neuron bundles with windowing (LLM in a Flash): neurons used in the
// last `window` tokens stay; a missing neuron is read from flash into a free slot of one
// preallocated buffer; expired and evicted ones free their slot in place. (The paper moves the
// last live bundle into each hole to keep them packed: a 7B token evicts thousands of 24 KiB
// bundles, and those copies were 40-50 ms a token; strata's operators take slot lists, so
// holes cost nothing.) The sparse operators run straight from the buffer: it is a matrix whose
// rows are slots (row stride = bundle size), and the slot list replaces the neuron list.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/anonymous_memory.h"
#include "core/thread_pool.h"
#include "tiers/bundle_layout.h"
#include "tiers/bundle_source.h"
#include "tiers/storage_profile.h"

namespace strata {

struct NeuronCacheStats {
  uint64_t hits = 0, misses = 0;  // neuron requests
  uint64_t bytes_read = 0, reads = 0;
  double read_seconds = 0;  // wall time spent waiting for reads
  uint64_t evictions = 0;
  uint64_t pin_bytes = 0;  // read at load for pinned neurons (not in bytes_read)
};

class NeuronCache {
 public:
  // keeps_data false: the bookkeeping alone, no buffer and no reads (the decisions and the
  // reads a cache would make, counted in stats(): the placement plan's replay).
  NeuronCache(const BundleLayout& layout, int64_t capacity, int window, bool keeps_data = true);
  ~NeuronCache();
  NeuronCache(const NeuronCache&) = delete;
  NeuronCache& operator=(const NeuronCache&) = delete;

  // Makes `neurons` (sorted, distinct, at most capacity()) resident for token number `token`,
  // reading the missing ones from `source` (the layer's bundles start at `base_offset`);
  // slots[k] receives the slot of neurons[k]. Reads run on the pool's threads, adjacent
  // neurons merged into one read. A token whose neurons exceed the capacity is fetched in
  // several passes (pass 0, 1, ...): a later pass may evict what an earlier one of the same
  // token used, never what it needs itself.
  // A batch of `batch_tokens` tokens ending at `token` keeps what its first token's window
  // covers.
  // head_bytes > 0 (split reads): the missing neurons get only their first head_bytes (the
  // deciding row, BundleLayout::head_bytes) and are partial until complete().
  void fetch(std::span<const int32_t> neurons, int32_t* slots, BundleSource& source,
             uint64_t base_offset, int64_t token, ThreadPool& pool, int pass = 0,
             int64_t batch_tokens = 1, uint64_t head_bytes = 0);

  // Look-ahead through an asynchronous source: fetch()'s bookkeeping now, its reads put in
  // flight (BundleSource::submit); the slots hold their bundles once settle() has returned.
  // Any other call settles first. Best effort: only fitting(neurons, token) are fetched (slots
  // receives theirs). Returns whether any read was issued.
  bool fetch_ahead(std::span<const int32_t> neurons, int32_t* slots, BundleSource& source,
                   uint64_t base_offset, int64_t token, ThreadPool& pool);
  // Look-ahead's guesses that a fetch as `token` can take: the resident ones, and as many
  // missing ones as free slots and slots no token since `token` used make room for (what the
  // window keeps stays; pinned neurons take a cache's room, and a guess would otherwise be
  // refused whole). A view into the cache, valid until the next call.
  std::span<const int32_t> fitting(std::span<const int32_t> neurons, int64_t token);
  // Waits for fetch_ahead's reads (none pending: returns at once); on failure forgets their
  // neurons and rethrows. Returns when they were seen to land.
  BundleSource::Clock::time_point settle();
  bool unsettled() const { return pending_source_ != nullptr; }

  // Split reads, second step: reads the rest of the partial neurons among `active` (the
  // neurons whose deciding row came out non-zero), and drops the other partial neurons, whose
  // output is zero whatever the rest holds. Slots move: look them up again afterwards.
  void complete(std::span<const int32_t> active, BundleSource& source, uint64_t base_offset,
                ThreadPool& pool);
  bool is_partial(int32_t neuron) const {
    const int32_t s = slot_of_[static_cast<size_t>(neuron)];
    return s >= 0 && partial_[static_cast<size_t>(s)] != 0;
  }

  // Pins `neurons` (sorted, distinct, fewer than capacity()): reads them now and keeps them
  // whatever the window or the eviction pressure (hot neurons from a profile). The rest of the
  // cache works as before; a fetch may ask for at most capacity() - pinned() unpinned neurons.
  void pin(std::span<const int32_t> neurons, BundleSource& source, uint64_t base_offset,
           ThreadPool& pool);
  int64_t pinned() const { return pinned_; }
  bool is_pinned(int32_t neuron) const {
    const int32_t s = slot_of_[static_cast<size_t>(neuron)];
    return s >= 0 && last_used_[static_cast<size_t>(s)] == kPinned;
  }

  // Read merging: two runs of missing neurons separated by absent ones are read as one when the
  // storage profile says reading the gap costs less than a second request at `depth` reads in
  // flight (without a profile: gaps up to 16 KiB). Gap neurons then become resident too.
  void set_read_planning(const StorageProfile* profile, int depth) {
    profile_ = profile;
    depth_ = depth;
  }

  const uint8_t* data() const { return buffer_; }
  int64_t capacity() const { return capacity_; }
  // A slot for every neuron: neuron n lives in slot n (a run of neurons is read into
  // consecutive slots, and the products walk the buffer in address order), and nothing
  // expires (a freed slot could serve no other neuron; expiry would only read it again).
  bool holds_every_neuron() const { return capacity_ >= layout_.n_ff; }
  int64_t live() const { return live_; }
  const NeuronCacheStats& stats() const { return stats_; }
  uint64_t bytes() const { return static_cast<uint64_t>(capacity_) * layout_.bundle_bytes; }
  // Bytes of the per-neuron and per-slot bookkeeping a cache of `capacity` slots keeps beside
  // its buffer, and of the temporaries one fetch may hold (for the placement inventory).
  static uint64_t bookkeeping_bytes(int64_t n_ff, int64_t capacity);
  // Slot of a neuron, or -1 (for tests).
  int32_t slot_of(int32_t neuron) const { return slot_of_[static_cast<size_t>(neuron)]; }

 private:
  void remove_slot(int32_t slot);
  int32_t take_free_slot(int32_t neuron);
  // fetch()'s bookkeeping: slots assigned, the reads to issue in requests_ (neurons in read_).
  // plan_reads' steps: the window's expiry; uses counted and hits served (the missing neurons
  // returned); the slots this token's pass does not need; the missing neurons as runs, merged
  // across absent gaps where one read is cheaper (`gaps`: the absent neurons merged in); the
  // lowest-scored victims evicted; the runs' read requests into free slots.
  void expire(int64_t token, int64_t batch_tokens);
  std::vector<int32_t> note_uses(std::span<const int32_t> neurons, int64_t token, int pass);
  std::vector<int32_t> victim_slots(int64_t token, int pass) const;
  std::vector<std::pair<int32_t, int32_t>> merged_runs(const std::vector<int32_t>& missing,
                                                       int64_t spare, bool split,
                                                       int64_t& gaps) const;
  void evict(std::vector<int32_t>& victims, int64_t count, int64_t token);
  void request_runs(const std::vector<std::pair<int32_t, int32_t>>& ranges, uint64_t base_offset,
                    int64_t token, int pass, uint64_t head_bytes);
  void plan_reads(std::span<const int32_t> neurons, int32_t* slots, uint64_t base_offset,
                  int64_t token, int pass, int64_t batch_tokens, uint64_t head_bytes);
  void forget(std::span<const int32_t> neurons);
  void count_reads(std::span<const ReadRequest> requests);
  // Reads the requests; on failure forgets `neurons` (their slots hold nothing valid).
  void read_or_forget(std::vector<ReadRequest>& requests, std::span<const int32_t> neurons,
                      BundleSource& source, ThreadPool& pool);
  static constexpr int64_t kPinned = INT64_MAX;  // last_used_ of a pinned slot
  static constexpr float kDecay = 0.8f;          // per token (0.5 and 0.95 measured no better)

  BundleLayout layout_;
  int64_t capacity_;
  int window_;
  AnonymousMemory memory_;
  uint8_t* buffer_ = nullptr;  // memory_'s, aligned to its pages (kBundleAlign at least)
  std::vector<int32_t> slot_of_;    // per neuron, -1 when absent
  std::vector<int32_t> neuron_of_;  // per slot
  std::vector<int64_t> last_used_;  // per slot: the last token that used it
  std::vector<int32_t> last_pass_;  // per slot: the pass of that token
  std::vector<uint8_t> partial_;    // per slot: only the head has been read (split reads)
  std::vector<int32_t> free_;       // free slots, the lowest on top (a cold run reads into
                                    // consecutive slots)
  std::vector<void*> pieces_;       // a fetch's scattered destinations (kept between fetches)
  std::vector<ReadRequest> requests_;  // the last plan's reads, of these neurons:
  std::vector<int32_t> read_;
  std::vector<int32_t> ahead_;  // fetch_ahead's guesses that fit
  // fetch_ahead's reads in flight: their source (null: none), ticket and neurons.
  BundleSource* pending_source_ = nullptr;
  uint64_t pending_ticket_ = 0;
  std::vector<int32_t> pending_;
  uint64_t head_bytes_ = 0;         // of the partial slots
  // Per neuron, kept after eviction: uses decayed by kDecay per token since, as of use_token_.
  // Eviction takes the lowest first, so a neuron used by many recent tokens outlasts one a
  // single token asked for (the predictor's false positives are mostly such).
  std::vector<float> use_score_;
  std::vector<int64_t> use_token_;
  float score_now(int32_t neuron, int64_t token) const;
  int64_t live_ = 0;
  int64_t pinned_ = 0;
  int64_t expired_through_ = -1;  // tokens up to this have had their expiries applied
  NeuronCacheStats stats_;
  const StorageProfile* profile_ = nullptr;
  int depth_ = 1;
  StorageProfile no_profile_;
};

}  // namespace strata
