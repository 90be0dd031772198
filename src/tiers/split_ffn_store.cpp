#include "tiers/split_ffn_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace strata {

SplitFfnStore::SplitFfnStore(Backend& device, FfnStore& below,
                             const std::vector<std::vector<int32_t>>& vram, int64_t n_ff,
                             int64_t max_tokens)
    : device_(device), below_(below) {
  try {
    for (size_t l = 0; l < vram.size(); ++l) {
      DeviceLayer d;
      d.slot_of.assign(static_cast<size_t>(n_ff), -1);
      const std::vector<int32_t>& ids = vram[l];
      for (size_t k = 0; k < ids.size(); ++k) {
        if (ids[k] < 0 || ids[k] >= n_ff || (k > 0 && ids[k] <= ids[k - 1]))
          fail("layer {}'s VRAM neurons are not ascending ids below {}", l, n_ff);
        d.slot_of[static_cast<size_t>(ids[k])] = static_cast<int32_t>(k);
      }
      copy_layer(static_cast<int64_t>(l), ids, d);
      layers_.push_back(std::move(d));
    }
    slots_ =
        device.allocate(static_cast<uint64_t>(n_ff) * sizeof(int32_t), "the VRAM neurons' slots");
  } catch (...) {
    for (const Buffer& b : buffers_) device_.release(b);
    throw;
  }
  ids_.resize(static_cast<size_t>(n_ff));
  sorted_.resize(static_cast<size_t>(n_ff));
  reordered_.resize(static_cast<size_t>(n_ff));
  host_slots_.resize(static_cast<size_t>(n_ff));
  need_.resize(static_cast<size_t>(max_tokens * n_ff));
  need_sorted_.resize(need_.size());
}

SplitFfnStore::~SplitFfnStore() {
  for (const Buffer& b : buffers_) device_.release(b);
  device_.release(slots_);
}

MatrixView SplitFfnStore::allocate_rows(const MatrixView& shape, size_t count, const char* what,
                                        int64_t layer) {
  if (shape.layout != Layout::Rows) fail("layer {} {}: a split FFN reads rows", layer, what);
  const uint64_t bytes = std::max<uint64_t>(shape.row_bytes * count, 1);
  const Buffer b =
      device_.allocate(bytes, fmt::format("layer {} {} ({} VRAM neurons)", layer, what, count));
  buffers_.push_back(b);
  MatrixView v = shape;
  v.data = b.data;
  v.rows = static_cast<int64_t>(count);
  v.device = b.device;
  return v;
}

void SplitFfnStore::copy_layer(int64_t layer, const std::vector<int32_t>& ids, DeviceLayer& d) {
  // The rows come from the store below (RAM, or bundles read from flash) a few MiB at a time.
  const NeuronRowShapes shapes = below_.row_shapes(layer);
  if (shapes.has_gate) d.gate = allocate_rows(shapes.gate, ids.size(), "ffn_gate", layer);
  d.up = allocate_rows(shapes.up, ids.size(), "ffn_up", layer);
  d.down_t = allocate_rows(shapes.down_t, ids.size(), "ffn_down_t", layer);
  const size_t chunk =
      static_cast<size_t>(std::max<uint64_t>(kCopyBytes / shapes.neuron_bytes(), 1));
  std::vector<uint8_t> gate, up, down_t;
  for (size_t start = 0; start < ids.size(); start += chunk) {
    const size_t count = std::min(chunk, ids.size() - start);
    const std::span<const int32_t> part(ids.data() + start, count);
    gate.resize(shapes.has_gate ? count * shapes.gate.row_bytes : 0);
    up.resize(count * shapes.up.row_bytes);
    down_t.resize(count * shapes.down_t.row_bytes);
    below_.copy_rows(layer, part, gate.data(), up.data(), down_t.data());
    const auto place = [&](const MatrixView& m, const std::vector<uint8_t>& rows) {
      device_.upload(const_cast<uint8_t*>(m.data) + start * m.row_bytes, rows.data(), rows.size());
    };
    if (shapes.has_gate) place(d.gate, gate);
    place(d.up, up);
    place(d.down_t, down_t);
  }
}

void SplitFfnStore::begin(int64_t layer, NeuronList& list, int64_t token) {
  layer_ = layer;
  list_ = list;
  count_ = list.count;
  tokens_ = list.tokens;
  device_served_ = below_started_ = false;
  const int64_t ff = list.need_stride;
  const auto count = static_cast<size_t>(count_);
  const DeviceLayer& d = layers_[static_cast<size_t>(layer)];
  // The list as selected (ascending ids, need[b][k]) comes to the host, every token's need in
  // one copy (the rows' entries past the list's count come along unread)...
  const uint64_t need_span = static_cast<uint64_t>((tokens_ - 1) * ff) + count;
  device_.download(ids_.data(), list.ids, count * sizeof(int32_t));
  if (tokens_ > 0) device_.download(need_.data(), list.need, need_span);
  // ... is partitioned, the device's neurons first, each part keeping its order ...
  int64_t k = 0;
  for (size_t i = 0; i < count; ++i)
    if (d.slot_of[static_cast<size_t>(ids_[i])] >= 0)
      sorted_[static_cast<size_t>(k++)] = static_cast<int32_t>(i);
  on_device_ = k;
  for (size_t i = 0; i < count; ++i)
    if (d.slot_of[static_cast<size_t>(ids_[i])] < 0)
      sorted_[static_cast<size_t>(k++)] = static_cast<int32_t>(i);
  for (size_t j = 0; j < count; ++j) {
    const auto i = static_cast<size_t>(sorted_[j]);
    reordered_[j] = ids_[i];
    if (static_cast<int64_t>(j) < on_device_)
      host_slots_[j] = d.slot_of[static_cast<size_t>(ids_[i])];
    for (int64_t b = 0; b < tokens_; ++b) {
      const uint8_t need = need_[static_cast<size_t>(b * ff) + i];
      need_sorted_[static_cast<size_t>(b * ff) + j] = need;
      (static_cast<int64_t>(j) < on_device_ ? device_pairs_ : ram_pairs_) += need != 0;
    }
  }
  std::copy_n(reordered_.begin(), count, ids_.begin());
  const uint64_t n_ids = count * sizeof(int32_t), n_need = tokens_ > 0 ? need_span : 0;
  link_bytes_ += 2 * (n_ids + n_need) + static_cast<uint64_t>(on_device_) * sizeof(int32_t);
  device_rows_ += static_cast<uint64_t>(on_device_);
  ram_rows_ += static_cast<uint64_t>(count_ - on_device_);
  // ... and goes back to the device reordered (the rest is read from the host copies).
  device_.upload(list.ids, ids_.data(), count * sizeof(int32_t));
  if (tokens_ > 0) device_.upload(list.need, need_sorted_.data(), need_span);
  device_.upload(slots_.data, host_slots_.data(),
                 static_cast<uint64_t>(on_device_) * sizeof(int32_t));
  // The rest as the store below's own list (it may reorder it: the host copies only).
  rest_ = NeuronList{ids_.data() + on_device_, count_ - on_device_,
                     need_sorted_.data() + on_device_, ff, tokens_};
  token_ = token;
}

bool SplitFfnStore::next(FfnSegment& s) {
  const DeviceLayer& d = layers_[static_cast<size_t>(layer_)];
  if (!device_served_) {
    device_served_ = true;
    if (on_device_ > 0) {
      const auto* slots = reinterpret_cast<const int32_t*>(slots_.data);
      s = FfnSegment{device_.device(),
                     d.gate,
                     d.up,
                     d.down_t,
                     std::span<const int32_t>(slots, static_cast<size_t>(on_device_)),
                     std::span<const int32_t>(list_.ids, static_cast<size_t>(on_device_)),
                     0,
                     on_device_,
                     false};
      s.need = list_.need;
      return true;
    }
  }
  if (count_ == on_device_) return false;
  if (!below_started_) {
    below_started_ = true;
    below_.begin(layer_, rest_, token_);
  }
  if (!below_.next(s)) return false;
  to_whole_list(s);
  return true;
}

void SplitFfnStore::to_whole_list(FfnSegment& s) const {
  // The store below numbers the rest's entries from 0; its need is the host copy.
  s.begin += on_device_;
  s.end += on_device_;
  s.need = const_cast<uint8_t*>(need_sorted_.data());
}

void SplitFfnStore::refine(FfnSegment& s, std::span<const int32_t> active) {
  s.begin -= on_device_;
  s.end -= on_device_;
  below_.refine(s, active);
  s.begin += on_device_;
  s.end += on_device_;
}

}  // namespace strata
