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
  // slot_of_, use_score_, use_token_ per neuron; neuron_of_, last_used_, last_pass_, partial_,
  // free_, pieces_ per slot; a fetch's lists (missing, victims, scores, runs, requests) at most
  // ~64 B a slot.
  return static_cast<uint64_t>(n_ff) * (4 + 4 + 8) +
         static_cast<uint64_t>(capacity) * (4 + 8 + 4 + 1 + 4 + 8 + 64);
}

NeuronCache::NeuronCache(const BundleLayout& layout, int64_t capacity, int window, bool keeps_data)
    : layout_(layout), capacity_(capacity), window_(window) {
  if (capacity <= 0) fail("a neuron cache needs at least one slot");
  if (window <= 0) fail("the neuron cache window must be at least one token");
  const uint64_t bytes = static_cast<uint64_t>(capacity) * layout.bundle_bytes;
  // In transparent huge pages, as the weights in RAM are: the products read the cache like a
  // matrix, and with 4 KiB pages their TLB misses made a column-bundled 1B model's FFN 86 ms a
  // token with every column cached after the first tokens, 33 in huge pages (`strata bench -n 32
  // -r 3 --window 1000`, TEAL 50%).
  if (keeps_data) {
    try {
      memory_ = AnonymousMemory(bytes);
    } catch (const std::bad_alloc&) {
      fail("cannot allocate a neuron cache of {} bytes", bytes);
    }
    buffer_ = memory_.data();
  }
  slot_of_.assign(static_cast<size_t>(layout.n_ff), -1);
  use_score_.assign(static_cast<size_t>(layout.n_ff), 0.0f);
  use_token_.assign(static_cast<size_t>(layout.n_ff), 0);
  neuron_of_.assign(static_cast<size_t>(capacity), -1);
  last_used_.assign(static_cast<size_t>(capacity), -1);
  last_pass_.assign(static_cast<size_t>(capacity), 0);
  partial_.assign(static_cast<size_t>(capacity), 0);
  if (!holds_every_neuron()) {
    free_.resize(static_cast<size_t>(capacity));
    for (int64_t k = 0; k < capacity; ++k)
      free_[static_cast<size_t>(k)] = static_cast<int32_t>(capacity - 1 - k);
  }
}

NeuronCache::~NeuronCache() {
  try {  // nothing may land in the buffer after it is freed
    settle();
  } catch (const std::exception&) {
  }
}

void NeuronCache::remove_slot(int32_t slot) {
  slot_of_[static_cast<size_t>(neuron_of_[slot])] = -1;
  neuron_of_[slot] = -1;
  last_used_[slot] = -1;
  partial_[slot] = 0;
  if (!holds_every_neuron()) free_.push_back(slot);
  --live_;
  ++stats_.evictions;
}

int32_t NeuronCache::take_free_slot(int32_t neuron) {
  ++live_;
  if (holds_every_neuron()) return neuron;
  const int32_t s = free_.back();
  free_.pop_back();
  return s;
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
  settle();
  plan_reads(neurons, slots, base_offset, token, pass, batch_tokens, head_bytes);
  if (requests_.empty()) return;
  if (buffer_ == nullptr)
    count_reads(requests_);  // bookkeeping alone: what would be read
  else
    read_or_forget(requests_, read_, source, pool);
}

bool NeuronCache::fetch_ahead(std::span<const int32_t> neurons, int32_t* slots,
                              BundleSource& source, uint64_t base_offset, int64_t token,
                              ThreadPool& pool) {
  if (buffer_ == nullptr) fail("a neuron cache without data reads nothing ahead");
  settle();
  neurons = fitting(neurons, token);
  plan_reads(neurons, slots, base_offset, token, 0, 1, 0);
  if (requests_.empty()) return false;
  try {
    pending_ticket_ = source.submit(requests_, pool);
  } catch (...) {
    forget(read_);
    throw;
  }
  pending_source_ = &source;
  pending_ = read_;
  count_reads(requests_);
  return true;
}

std::span<const int32_t> NeuronCache::fitting(std::span<const int32_t> neurons, int64_t token) {
  settle();
  int64_t room = capacity_ - live_;
  for (int32_t s = 0; s < capacity_; ++s) room += neuron_of_[s] >= 0 && last_used_[s] < token;
  ahead_.clear();
  for (int32_t n : neurons) {
    if (slot_of_[static_cast<size_t>(n)] < 0) {
      if (room == 0) continue;
      --room;
    }
    ahead_.push_back(n);
  }
  return ahead_;
}

BundleSource::Clock::time_point NeuronCache::settle() {
  if (pending_source_ == nullptr) return BundleSource::Clock::now();
  BundleSource& source = *pending_source_;
  pending_source_ = nullptr;
  Timer t;
  try {
    const BundleSource::Clock::time_point landed = source.wait(pending_ticket_);
    stats_.read_seconds += t.seconds();
    return landed;
  } catch (...) {
    stats_.read_seconds += t.seconds();
    forget(pending_);
    throw;
  }
}

void NeuronCache::forget(std::span<const int32_t> neurons) {
  for (int32_t n : neurons)
    if (slot_of_[static_cast<size_t>(n)] >= 0) remove_slot(slot_of_[static_cast<size_t>(n)]);
}

void NeuronCache::count_reads(std::span<const ReadRequest> requests) {
  stats_.reads += requests.size();
  for (const ReadRequest& r : requests) stats_.bytes_read += r.bytes;
}

void NeuronCache::expire(int64_t token, int64_t batch_tokens) {
  // Windowing: neurons not used in the last `window` tokens leave.
  if (token <= expired_through_ || holds_every_neuron()) return;
  for (int32_t s = 0; s < capacity_; ++s)
    if (neuron_of_[s] >= 0 && last_used_[s] <= token - (batch_tokens - 1) - window_)
      remove_slot(s);
  expired_through_ = token;
}

std::vector<int32_t> NeuronCache::note_uses(std::span<const int32_t> neurons, int64_t token,
                                            int pass) {
  // A cache with a slot for every neuron never evicts: no use counts.
  const bool every = holds_every_neuron();
  std::vector<int32_t> missing;
  for (int32_t n : neurons) {
    if (!every &&
        (use_token_[static_cast<size_t>(n)] != token || use_score_[static_cast<size_t>(n)] == 0)) {
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
  return missing;
}

std::vector<int32_t> NeuronCache::victim_slots(int64_t token, int pass) const {
  std::vector<int32_t> victims;
  if (holds_every_neuron()) return victims;  // no victims: it never evicts
  for (int32_t s = 0; s < capacity_; ++s)
    if (neuron_of_[s] >= 0 &&
        (last_used_[s] < token || (last_used_[s] == token && last_pass_[s] < pass)))
      victims.push_back(s);
  return victims;
}

std::vector<std::pair<int32_t, int32_t>> NeuronCache::merged_runs(
    const std::vector<int32_t>& missing, int64_t spare, bool split, int64_t& gaps) const {
  const StorageProfile& sp = profile_ != nullptr ? *profile_ : no_profile_;
  const uint64_t bb = layout_.bundle_bytes;
  std::vector<std::pair<int32_t, int32_t>> ranges;  // [first, last]
  gaps = 0;
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
  return ranges;
}

void NeuronCache::evict(std::vector<int32_t>& victims, int64_t count, int64_t token) {
  if (count <= 0) return;
  // Of the neurons this token does not need, those with the lowest decayed use count make
  // room (recency and frequency together).
  std::vector<float> score(static_cast<size_t>(capacity_));
  for (int32_t s : victims) score[static_cast<size_t>(s)] = score_now(neuron_of_[s], token);
  std::partial_sort(victims.begin(), victims.begin() + count, victims.end(),
                    [&](int32_t a, int32_t b) {
                      // A later pass of this token must not evict what an earlier one used
                      // after what older tokens used.
                      if ((last_used_[a] == token) != (last_used_[b] == token))
                        return last_used_[b] == token;
                      return score[static_cast<size_t>(a)] < score[static_cast<size_t>(b)];
                    });
  victims.resize(static_cast<size_t>(count));
  // Highest first onto the free list: the lowest slots are taken first.
  std::sort(victims.begin(), victims.end(), std::greater<>());
  for (int32_t s : victims) remove_slot(s);
}

void NeuronCache::request_runs(const std::vector<std::pair<int32_t, int32_t>>& ranges,
                               uint64_t base_offset, int64_t token, int pass,
                               uint64_t head_bytes) {
  if (ranges.empty()) return;
  const bool split = head_bytes > 0 && head_bytes < layout_.bundle_bytes;
  pieces_.clear();
  size_t total = 0;
  for (const auto& [first, last] : ranges) total += static_cast<size_t>(last - first + 1);
  pieces_.reserve(total);  // requests point into it
  for (const auto& [first, last] : ranges) {
    for (int32_t start = first; start <= last; start += ReadRequest::kMaxPieces) {
      const int32_t end = std::min<int32_t>(last, start + ReadRequest::kMaxPieces - 1);
      const size_t first_piece = pieces_.size();
      bool consecutive = true;
      for (int32_t n = start; n <= end; ++n) {
        const int32_t s = take_free_slot(n);
        slot_of_[static_cast<size_t>(n)] = s;
        neuron_of_[s] = n;
        last_used_[s] = token;
        last_pass_[s] = pass;
        partial_[static_cast<size_t>(s)] = split;
        consecutive &= n == start || s == slot_of_[static_cast<size_t>(n - 1)] + 1;
        pieces_.push_back(buffer_ == nullptr
                              ? nullptr
                              : buffer_ + static_cast<uint64_t>(s) * layout_.bundle_bytes);
        read_.push_back(n);
      }
      const auto count = static_cast<uint32_t>(end - start + 1);
      ReadRequest q{pieces_[first_piece], split ? head_bytes : count * layout_.bundle_bytes,
                    base_offset + static_cast<uint64_t>(start) * layout_.bundle_bytes};
      if (!consecutive) q.pieces = count, q.piece_dst = pieces_.data() + first_piece;
      requests_.push_back(q);
    }
  }
  if (split) head_bytes_ = head_bytes;
}

void NeuronCache::plan_reads(std::span<const int32_t> neurons, int32_t* slots, uint64_t base_offset,
                             int64_t token, int pass, int64_t batch_tokens, uint64_t head_bytes) {
  requests_.clear();
  read_.clear();
  const bool split = head_bytes > 0 && head_bytes < layout_.bundle_bytes;
  if (split && head_bytes % kBundleAlign != 0) fail("split reads need an aligned head");
  if (static_cast<int64_t>(neurons.size()) > capacity_)
    fail("{} neurons requested at once from a cache of {}", neurons.size(), capacity_);
  if (token < 0) fail("token numbers start at 0");
  expire(token, batch_tokens);
  const std::vector<int32_t> missing = note_uses(neurons, token, pass);
  // Slots this token does not need (of older tokens, or of this token's earlier passes): what
  // makes room when the cache is full, for the missing neurons and for gaps a merged read
  // brings along.
  std::vector<int32_t> victims = victim_slots(token, pass);
  const int64_t need = live_ + static_cast<int64_t>(missing.size());
  if (static_cast<int64_t>(victims.size()) < std::max<int64_t>(0, need - capacity_))
    fail(
        "this token needs {} neurons of a layer but the RAM budget leaves room for {}; raise "
        "--ram-budget",
        neurons.size(), capacity_);
  // Runs of neuron ids to read: consecutive missing neurons, joined across gaps of absent
  // neurons when one longer read is cheaper than two and the cache can make room for the gap
  // (free slots, then slots this token does not need: a full cache of a layer whose columns
  // are read scattered -- TEAL from column bundles -- otherwise read bundle by bundle, 31,000
  // reads a token for a 1B model). Every absent neuron of a cache with a slot for every neuron
  // has its own.
  const int64_t spare =
      holds_every_neuron() ? INT64_MAX : capacity_ - need + static_cast<int64_t>(victims.size());
  int64_t gaps = 0;
  const auto ranges = merged_runs(missing, spare, split, gaps);
  evict(victims, need + gaps - capacity_, token);
  // Each run is one read: into consecutive slots where the free list gives them, else
  // scattered into its slots (ReadRequest::pieces).
  request_runs(ranges, base_offset, token, pass, head_bytes);
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
  count_reads(requests);
  if (!error) return;
  forget(neurons);
  std::rethrow_exception(error);
}

void NeuronCache::complete(std::span<const int32_t> active, BundleSource& source,
                           uint64_t base_offset, ThreadPool& pool) {
  if (buffer_ == nullptr) fail("a neuron cache without data reads no second steps");
  settle();
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
  // The rest of the partial neurons were zero: they leave.
  for (int32_t s = 0; s < capacity_; ++s)
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
  // Gap neurons count as unused (the first token may evict them): last used "before token 0".
  for (int64_t s = 0; s < capacity_; ++s)
    if (neuron_of_[static_cast<size_t>(s)] >= 0 && last_used_[static_cast<size_t>(s)] != kPinned)
      last_used_[static_cast<size_t>(s)] = -1;
  pinned_ = static_cast<int64_t>(neurons.size());
  // Load-time reads, not a token's: counted apart.
  const uint64_t pin_bytes = stats_.bytes_read;
  stats_ = NeuronCacheStats{};
  stats_.pin_bytes = pin_bytes;
}

}  // namespace strata
