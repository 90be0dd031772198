// A layer's FFN split by the placement plan between a device (the hot neurons: their gate, up
// and down_t rows copied into its memory, slot k holding the layer's k-th VRAM neuron in id
// order) and the store below it (the rest: the model's matrices in RAM, or the flash tier's
// neuron caches in front of the bundles: VRAM, RAM and flash). begin() partitions the selected
// neurons on the host: the device's first, then the rest, each part ascending; the list's ids
// and need are reordered so on the device, and mirrored in host memory, where the rest is
// handed to the store below as its own list (whose segments, rows and need the CPU reads). A
// token's sum is the device part's plus the segments below in order (ffn_store.h), so a split
// computed on one CPU gives the bits a device and a CPU give together.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "tiers/ffn_store.h"

namespace strata {

class SplitFfnStore final : public FfnStore {
 public:
  // `vram[l]`: layer l's device neurons, ascending. `below`: where every neuron is held on the
  // host (it serves the rest and must outlive this store). Copies the device rows now, from
  // `below` (counted by the device's allocator, each named).
  SplitFfnStore(Backend& device, FfnStore& below, const std::vector<std::vector<int32_t>>& vram,
                int64_t n_ff, int64_t max_tokens);
  ~SplitFfnStore() override;
  SplitFfnStore(const SplitFfnStore&) = delete;
  SplitFfnStore& operator=(const SplitFfnStore&) = delete;

  const char* name() const override { return "vram+below"; }
  void begin(int64_t layer, NeuronList& list, int64_t token) override;
  bool next(FfnSegment& segment) override;
  void refine(FfnSegment& segment, std::span<const int32_t> active) override;
  NeuronRowShapes row_shapes(int64_t layer) const override { return below_.row_shapes(layer); }
  void copy_rows(int64_t layer, std::span<const int32_t> ids, uint8_t* gate, uint8_t* up,
                 uint8_t* down_t) override {
    below_.copy_rows(layer, ids, gate, up, down_t);
  }

  // Since creation: token-neuron pairs served from the device and from RAM.
  uint64_t device_pairs() const { return device_pairs_; }
  uint64_t ram_pairs() const { return ram_pairs_; }
  // Since creation: neuron rows (gate, up, down_t of one neuron) read on the device and from the
  // store below (its RAM: matrices or caches), and bytes the store moved between host and
  // device (the selection down, its reordered form up).
  uint64_t device_rows_read() const { return device_rows_; }
  uint64_t ram_rows_read() const { return ram_rows_; }
  uint64_t link_bytes() const { return link_bytes_; }
  // One neuron's gate + up + down_t row bytes in `layer`.
  uint64_t neuron_bytes(int64_t layer) const { return below_.row_shapes(layer).neuron_bytes(); }
  // Rows the constructor copies through host memory at a time (the three matrices' together, at
  // most, or one neuron's): transient RAM at load, within the process's planned slack.
  static constexpr uint64_t kCopyBytes = uint64_t{2} << 20;

 private:
  struct DeviceLayer {
    MatrixView gate, up, down_t;   // slot rows
    std::vector<int32_t> slot_of;  // per neuron id: its slot, or -1 in RAM
  };
  void to_whole_list(FfnSegment& segment) const;
  void copy_layer(int64_t layer, const std::vector<int32_t>& ids, DeviceLayer& d);
  MatrixView allocate_rows(const MatrixView& shape, size_t count, const char* what, int64_t layer);

  Backend& device_;
  FfnStore& below_;
  std::vector<DeviceLayer> layers_;
  std::vector<Buffer> buffers_;
  Buffer slots_;  // the device part's slots, [n_ff] int32 in the device's memory
  // The current list, reordered, on the host.
  std::vector<int32_t> ids_, host_slots_;
  std::vector<uint8_t> need_, need_sorted_;
  std::vector<int32_t> sorted_, reordered_;
  int64_t layer_ = 0, count_ = 0, on_device_ = 0, tokens_ = 0, token_ = 0;
  bool device_served_ = false, below_started_ = false;
  NeuronList list_, rest_;  // the whole list (device memory) and the rest's (host)
  uint64_t device_pairs_ = 0, ram_pairs_ = 0;
  uint64_t device_rows_ = 0, ram_rows_ = 0, link_bytes_ = 0;
};

}  // namespace strata
