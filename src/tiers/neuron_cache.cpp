#include "tiers/neuron_cache.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "core/error.h"
#include "core/timer.h"

namespace strata {

uint64_t NeuronCache::bookkeeping_bytes(int64_t n_ff, int64_t capacity) {
  // slot_of_, use_score_, use_token_ per neuron; neuron_of_, last_used_, last_pass_, partial_
  // per slot; a fetch's lists (missing, victims, scores, runs, requests) at most ~64 B a slot.
  return static_cast<uint64_t>(n_ff) * (4 + 4 + 8) +
         static_cast<uint64_t>(capacity) * (4 + 8 + 4 + 1 + 64);
}

NeuronCache::NeuronCache(const BundleLayout& layout, int64_t capacity, int window)
    : layout_(layout), capacity_(capacity), window_(window) {
  if (capacity <= 0) fail("a neuron cache needs at least one slot");
  if (window <= 0) fail("the neuron cache window must be at least one token");
  const uint64_t bytes = static_cast<uint64_t>(capacity) * layout.bundle_bytes;
  // In transparent huge pages, as the weights in RAM are: the products read the cache like a
  // matrix, and with 4 KiB pages their TLB misses made a column-bundled 1B model's FFN 86 ms a
  // token with every column cached after the first tokens, 33 in huge pages (`strata bench -n 32
  // -r 3 --window 1000`, TEAL 50%).
  try {
    memory_ = AnonymousMemory(bytes);
  } catch (const std::bad_alloc&) {
    fail("cannot allocate a neuron cache of {} bytes", bytes);
  }
  buffer_ = memory_.data();
  slot_of_.assign(static_cast<size_t>(layout.n_ff), -1);
  use_score_.assign(static_cast<size_t>(layout.n_ff), 0.0f);
  use_token_.assign(static_cast<size_t>(layout.n_ff), 0);
  neuron_of_.assign(static_cast<size_t>(capacity), -1);
  last_used_.assign(static_cast<size_t>(capacity), -1);
  last_pass_.assign(static_cast<size_t>(capacity), 0);
  partial_.assign(static_cast<size_t>(capacity), 0);
}

NeuronCache::~NeuronCache() = default;

void NeuronCache::remove_slot(int32_t slot) {
  // Move the last live bundle into the hole: live bundles stay packed at the front.
  const int32_t last = static_cast<int32_t>(live_ - 1);
  slot_of_[static_cast<size_t>(neuron_of_[slot])] = -1;
  if (slot != last) {
    std::memcpy(buffer_ + static_cast<uint64_t>(slot) * layout_.bundle_bytes,
                buffer_ + static_cast<uint64_t>(last) * layout_.bundle_bytes, layout_.bundle_bytes);
    neuron_of_[slot] = neuron_of_[last];
    last_used_[slot] = last_used_[last];
    last_pass_[slot] = last_pass_[last];
    partial_[slot] = partial_[last];
    slot_of_[static_cast<size_t>(neuron_of_[slot])] = slot;
  }
  neuron_of_[last] = -1;
  last_used_[last] = -1;
  partial_[last] = 0;
  --live_;
  ++stats_.evictions;
}

float NeuronCache::score_now(int32_t neuron, int64_t token) const {
  // kDecay^age from a table (this runs for every requested and every evictable neuron of every
  // layer and token); past 64 tokens (0.8^64 < 1e-6) a score counts as 0.
  static const auto decay = [] {
    std::array<float, 64> t{};
    for (size_t i = 0; i < t.size(); ++i) t[i] = std::pow(kDecay, static_cast<float>(i));
    return t;
  }();
  const auto n = static_cast<size_t>(neuron);
  const int64_t age = token - use_token_[n];
  if (age <= 0) return use_score_[n];
  return age < static_cast<int64_t>(decay.size()) ? use_score_[n] * decay[static_cast<size_t>(age)]
                                                  : 0.0f;
}

void NeuronCache::fetch(std::span<const int32_t> neurons, int32_t* slots, BundleSource& source,
                        uint64_t base_offset, int64_t token, ThreadPool& pool, int pass,
                        int64_t batch_tokens, uint64_t head_bytes) {
  const bool split = head_bytes > 0 && head_bytes < layout_.bundle_bytes;
  if (split && head_bytes % kBundleAlign != 0) fail("split reads need an aligned head");
  if (static_cast<int64_t>(neurons.size()) > capacity_)
    fail("{} neurons requested at once from a cache of {}", neurons.size(), capacity_);
  if (token < 0) fail("token numbers start at 0");
  // Windowing: neurons not used in the last `window` tokens leave.
  if (token > expired_through_) {
    for (int32_t s = static_cast<int32_t>(live_) - 1; s >= 0; --s)
      if (last_used_[s] <= token - (batch_tokens - 1) - window_) remove_slot(s);
    expired_through_ = token;
  }
  std::vector<int32_t> missing;
  for (int32_t n : neurons) {
    if (use_token_[static_cast<size_t>(n)] != token || use_score_[static_cast<size_t>(n)] == 0) {
      use_score_[static_cast<size_t>(n)] = score_now(n, token) + 1.0f;
      use_token_[static_cast<size_t>(n)] = token;
    }
    const int32_t s = slot_of_[static_cast<size_t>(n)];
    if (s >= 0) {
      if (last_used_[s] != kPinned) {
        last_used_[s] = token;
        last_pass_[s] = pass;
      }
      ++stats_.hits;
    } else {
      missing.push_back(n);
    }
  }
  stats_.misses += missing.size();
  // Slots this token does not need (of older tokens, or of this token's earlier passes): what
  // makes room when the cache is full, for the missing neurons and for gaps a merged read
  // brings along.
  std::vector<int32_t> victims;
  const int64_t need = live_ + static_cast<int64_t>(missing.size());
  for (int32_t s = 0; s < live_; ++s)
    if (last_used_[s] < token || (last_used_[s] == token && last_pass_[s] < pass))
      victims.push_back(s);
  const int64_t excess = std::max<int64_t>(0, need - capacity_);
  if (static_cast<int64_t>(victims.size()) < excess)
    fail(
        "this token needs {} neurons of a layer but the RAM budget leaves room for {}; raise "
        "--ram-budget",
        neurons.size(), capacity_);
  // Runs of neuron ids to read: consecutive missing neurons, joined across gaps of absent
  // neurons when one longer read is cheaper than two and the cache can make room for the gap
  // (free slots, then slots this token does not need: a full cache of a layer whose columns
  // are read scattered -- TEAL from column bundles -- otherwise read bundle by bundle, 31,000
  // reads a token for a 1B model).
  const StorageProfile& sp = profile_ != nullptr ? *profile_ : no_profile_;
  const uint64_t bb = layout_.bundle_bytes;
  int64_t spare = capacity_ - need + static_cast<int64_t>(victims.size());
  std::vector<std::pair<int32_t, int32_t>> ranges;  // [first, last]
  int64_t gaps = 0;
  for (int32_t n : missing) {
    if (!ranges.empty()) {
      const int32_t last = ranges.back().second;
      const int64_t gap = n - last - 1;
      bool join = gap == 0 && !split;  // heads of neighbours are not contiguous
      if (!join && !split && gap <= spare) {
        bool absent = true;
        for (int32_t g = last + 1; g < n && absent; ++g)
          absent = slot_of_[static_cast<size_t>(g)] < 0;
        const uint64_t run = static_cast<uint64_t>(last - ranges.back().first + 1) * bb;
        join = absent && sp.merge_cheaper(run, static_cast<uint64_t>(gap) * bb, bb, depth_);
        if (join) spare -= gap, gaps += gap;
      }
      if (join) {
        ranges.back().second = n;
        continue;
      }
    }
    ranges.push_back({n, n});
  }
  const int64_t evict = std::max<int64_t>(0, need + gaps - capacity_);
  if (evict > 0) {
    // Of the neurons this token does not need, those with the lowest decayed use count make
    // room (recency and frequency together).
    std::vector<float> score(static_cast<size_t>(live_));
    for (int32_t s : victims) score[static_cast<size_t>(s)] = score_now(neuron_of_[s], token);
    std::partial_sort(victims.begin(), victims.begin() + evict, victims.end(),
                      [&](int32_t a, int32_t b) {
                        // A later pass of this token must not evict what an earlier one used
                        // after what older tokens used.
                        if ((last_used_[a] == token) != (last_used_[b] == token))
                          return last_used_[b] == token;
                        return score[static_cast<size_t>(a)] < score[static_cast<size_t>(b)];
                      });
    victims.resize(static_cast<size_t>(evict));
    // Remove from the highest slot down so the moves never touch a victim still to remove.
    std::sort(victims.begin(), victims.end(), std::greater<>());
    for (int32_t s : victims) remove_slot(s);
  }
  // Slots in order; a run's neurons take consecutive slots so it is one read.
  struct Run {
    int32_t first_neuron, first_slot, count;
  };
  std::vector<Run> runs;
  for (const auto& [first, last] : ranges) {
    runs.push_back({first, static_cast<int32_t>(live_), last - first + 1});
    for (int32_t n = first; n <= last; ++n) {
      const int32_t s = static_cast<int32_t>(live_++);
      slot_of_[static_cast<size_t>(n)] = s;
      neuron_of_[s] = n;
      last_used_[s] = token;
      last_pass_[s] = pass;
    }
  }
  if (!runs.empty()) {
    std::vector<ReadRequest> requests;
    std::vector<int32_t> read;
    for (const Run& run : runs) {
      requests.push_back(
          {buffer_ + static_cast<uint64_t>(run.first_slot) * layout_.bundle_bytes,
           split ? head_bytes : static_cast<uint64_t>(run.count) * layout_.bundle_bytes,
           base_offset + static_cast<uint64_t>(run.first_neuron) * layout_.bundle_bytes});
      for (int32_t n = run.first_neuron; n < run.first_neuron + run.count; ++n) {
        read.push_back(n);
        partial_[static_cast<size_t>(slot_of_[static_cast<size_t>(n)])] = split;
      }
    }
    if (split) head_bytes_ = head_bytes;
    read_or_forget(requests, read, source, pool);
  }
  for (size_t k = 0; k < neurons.size(); ++k) slots[k] = slot_of_[static_cast<size_t>(neurons[k])];
}

void NeuronCache::read_or_forget(std::vector<ReadRequest>& requests,
                                 std::span<const int32_t> neurons, BundleSource& source,
                                 ThreadPool& pool) {
  Timer t;
  std::exception_ptr error;
  try {
    source.read_batch(requests, pool);
  } catch (...) {
    error = std::current_exception();
  }
  stats_.read_seconds += t.seconds();
  stats_.reads += requests.size();
  for (const ReadRequest& r : requests) stats_.bytes_read += r.bytes;
  if (!error) return;
  // Forget them from the highest slot down, so no move touches one still to forget.
  std::vector<int32_t> forget;
  for (int32_t n : neurons) forget.push_back(slot_of_[static_cast<size_t>(n)]);
  std::sort(forget.begin(), forget.end(), std::greater<>());
  for (int32_t s : forget) remove_slot(s);
  std::rethrow_exception(error);
}

void NeuronCache::complete(std::span<const int32_t> active, BundleSource& source,
                           uint64_t base_offset, ThreadPool& pool) {
  std::vector<ReadRequest> requests;
  std::vector<int32_t> read;
  const uint64_t tail = layout_.bundle_bytes - head_bytes_;
  for (int32_t n : active) {
    const int32_t s = slot_of_[static_cast<size_t>(n)];
    if (s < 0 || partial_[static_cast<size_t>(s)] == 0) continue;
    requests.push_back(
        {buffer_ + static_cast<uint64_t>(s) * layout_.bundle_bytes + head_bytes_, tail,
         base_offset + static_cast<uint64_t>(n) * layout_.bundle_bytes + head_bytes_});
    read.push_back(n);
    partial_[static_cast<size_t>(s)] = 0;
  }
  if (!requests.empty()) read_or_forget(requests, read, source, pool);
  // The rest of the partial neurons were zero: they leave (highest slot first).
  for (int32_t s = static_cast<int32_t>(live_) - 1; s >= 0; --s)
    if (partial_[static_cast<size_t>(s)] != 0) {
      remove_slot(s);
      --stats_.evictions;  // not an eviction: never completed
    }
}

void NeuronCache::pin(std::span<const int32_t> neurons, BundleSource& source, uint64_t base_offset,
                      ThreadPool& pool) {
  if (pinned_ > 0 || live_ > 0) fail("neurons are pinned once, into an empty cache");
  if (static_cast<int64_t>(neurons.size()) >= capacity_)
    fail("{} pinned neurons leave no room in a cache of {}", neurons.size(), capacity_);
  // Read like a token's neurons (as token 0), then marked pinned; read merging may have
  // brought gap neurons along, which stay unpinned.
  std::vector<int32_t> slots(neurons.size());
  fetch(neurons, slots.data(), source, base_offset, 0, pool);
  for (int32_t s : slots) last_used_[static_cast<size_t>(s)] = kPinned;
  // Gap neurons count as unused: the first token may evict them.
  for (int64_t s = 0; s < live_; ++s)
    if (last_used_[static_cast<size_t>(s)] != kPinned) last_used_[static_cast<size_t>(s)] = -1;
  pinned_ = static_cast<int64_t>(neurons.size());
  // Load-time reads, not a token's: counted apart.
  const uint64_t pin_bytes = stats_.bytes_read;
  stats_ = NeuronCacheStats{};
  stats_.pin_bytes = pin_bytes;
}

}  // namespace strata
