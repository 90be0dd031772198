#include "tiers/split_ffn_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace strata {

SplitFfnStore::SplitFfnStore(Backend& device, std::span<const RamFfnLayer> ram,
                             const std::vector<std::vector<int32_t>>& vram, int64_t n_ff,
                             int64_t max_tokens)
    : device_(device), ram_(ram), n_ff_(n_ff) {
  if (vram.size() != ram.size())
    fail("a split FFN needs VRAM neurons for each of {} layers", ram.size());
  try {
    for (size_t l = 0; l < ram.size(); ++l) {
      DeviceLayer d;
      d.slot_of.assign(static_cast<size_t>(n_ff), -1);
      const std::vector<int32_t>& ids = vram[l];
      for (size_t k = 0; k < ids.size(); ++k) {
        if (ids[k] < 0 || ids[k] >= n_ff || (k > 0 && ids[k] <= ids[k - 1]))
          fail("layer {}'s VRAM neurons are not ascending ids below {}", l, n_ff);
        d.slot_of[static_cast<size_t>(ids[k])] = static_cast<int32_t>(k);
      }
      const auto li = static_cast<int64_t>(l);
      if (ram[l].gate.data != nullptr) d.gate = copy_rows(ram[l].gate, ids, "ffn_gate", li);
      d.up = copy_rows(ram[l].up, ids, "ffn_up", li);
      d.down_t = copy_rows(ram[l].down_t, ids, "ffn_down_t", li);
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

MatrixView SplitFfnStore::copy_rows(const MatrixView& m, const std::vector<int32_t>& ids,
                                    const char* what, int64_t layer) {
  if (m.layout != Layout::Rows) fail("layer {} {}: a split FFN reads rows", layer, what);
  const uint64_t bytes = std::max<uint64_t>(m.row_bytes * ids.size(), 1);
  const Buffer b = device_.allocate(
      bytes, fmt::format("layer {} {} ({} VRAM neurons)", layer, what, ids.size()));
  buffers_.push_back(b);
  std::vector<uint8_t> rows(bytes);
  for (size_t k = 0; k < ids.size(); ++k)
    std::copy_n(m.row(ids[k]), m.row_bytes, rows.data() + k * m.row_bytes);
  device_.upload(b.data, rows.data(), bytes);
  MatrixView v = m;
  v.data = b.data;
  v.rows = static_cast<int64_t>(ids.size());
  v.device = b.device;
  return v;
}

uint64_t SplitFfnStore::neuron_bytes(int64_t layer) const {
  const RamFfnLayer& l = ram_[static_cast<size_t>(layer)];
  return (l.gate.data != nullptr ? l.gate.row_bytes : 0) + l.up.row_bytes + l.down_t.row_bytes;
}

FfnStore::RowTypes SplitFfnStore::row_types(int64_t layer) const {
  const RamFfnLayer& l = ram_[static_cast<size_t>(layer)];
  return {l.gate.data != nullptr ? l.gate.type : l.up.type, l.up.type};
}

void SplitFfnStore::begin(int64_t layer, NeuronList& list, int64_t) {
  layer_ = layer;
  list_ = list;
  count_ = list.count;
  tokens_ = list.tokens;
  served_ = 0;
  const int64_t ff = list.need_stride;
  const auto count = static_cast<size_t>(count_);
  const DeviceLayer& d = layers_[static_cast<size_t>(layer)];
  // The list as selected (ascending ids, need[b][k]) comes to the host...
  device_.download(ids_.data(), list.ids, count * sizeof(int32_t));
  for (int64_t b = 0; b < tokens_; ++b)
    device_.download(need_.data() + b * ff, list.need + b * ff, count);
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
  const uint64_t n_ids = count * sizeof(int32_t), n_need = count * static_cast<uint64_t>(tokens_);
  link_bytes_ += 2 * (n_ids + n_need) + static_cast<uint64_t>(on_device_) * sizeof(int32_t);
  device_rows_ += static_cast<uint64_t>(on_device_);
  ram_rows_ += static_cast<uint64_t>(count_ - on_device_);
  // ... and goes back to the device reordered (the RAM part reads the host copies).
  device_.upload(list.ids, ids_.data(), count * sizeof(int32_t));
  for (int64_t b = 0; b < tokens_; ++b)
    device_.upload(list.need + b * ff, need_sorted_.data() + b * ff, count);
  device_.upload(slots_.data, host_slots_.data(),
                 static_cast<uint64_t>(on_device_) * sizeof(int32_t));
}

bool SplitFfnStore::next(FfnSegment& s) {
  const DeviceLayer& d = layers_[static_cast<size_t>(layer_)];
  if (served_ == 0 && on_device_ > 0) {
    served_ = 1;
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
  if (served_ <= 1 && count_ > on_device_) {
    served_ = 2;
    const RamFfnLayer& r = ram_[static_cast<size_t>(layer_)];
    s = FfnSegment{Device::Host,
                   r.gate,
                   r.up,
                   r.down_t,
                   std::span<const int32_t>(ids_.data() + on_device_,
                                            static_cast<size_t>(count_ - on_device_)),
                   {},
                   on_device_,
                   count_,
                   false};
    s.need = need_sorted_.data();
    return true;
  }
  return false;
}

}  // namespace strata
