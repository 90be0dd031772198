// A layer's FFN split by the placement plan between a device (the hot neurons: their gate, up
// and down_t rows copied into its memory, slot k holding the layer's k-th VRAM neuron in id
// order) and RAM (the rest: the model's matrices). begin() partitions the selected neurons on
// the host: the device's first, then RAM's, each part ascending; the list's ids and need are
// reordered so on the device, and mirrored in host memory for the RAM segment (whose rows and
// need the CPU reads). A token's sum is the device part's plus the RAM part's (segment order,
// ffn_store.h), so a split computed on one CPU gives the bits a device and a CPU give together.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "tiers/ffn_store.h"

namespace strata {

class SplitFfnStore final : public FfnStore {
 public:
  // `vram[l]`: layer l's device neurons, ascending. `ram`: every layer's matrices in host memory.
  // Copies the device rows now (counted by the device's allocator, each named).
  SplitFfnStore(Backend& device, std::span<const RamFfnLayer> ram,
                const std::vector<std::vector<int32_t>>& vram, int64_t n_ff, int64_t max_tokens);
  ~SplitFfnStore() override;
  SplitFfnStore(const SplitFfnStore&) = delete;
  SplitFfnStore& operator=(const SplitFfnStore&) = delete;

  const char* name() const override { return "vram+ram"; }
  RowTypes row_types(int64_t layer) const override;
  void begin(int64_t layer, NeuronList& list, int64_t token) override;
  bool next(FfnSegment& segment) override;

  // Since creation: token-neuron pairs served from the device and from RAM.
  uint64_t device_pairs() const { return device_pairs_; }
  uint64_t ram_pairs() const { return ram_pairs_; }
  // Since creation: neuron rows (gate, up, down_t of one neuron) read on each side, and bytes the
  // store moved between host and device (the selection down, its reordered form up).
  uint64_t device_rows_read() const { return device_rows_; }
  uint64_t ram_rows_read() const { return ram_rows_; }
  uint64_t link_bytes() const { return link_bytes_; }
  // One neuron's gate + up + down_t row bytes in `layer`.
  uint64_t neuron_bytes(int64_t layer) const;

 private:
  struct DeviceLayer {
    MatrixView gate, up, down_t;   // slot rows
    std::vector<int32_t> slot_of;  // per neuron id: its slot, or -1 in RAM
  };
  MatrixView copy_rows(const MatrixView& m, const std::vector<int32_t>& ids, const char* what,
                       int64_t layer);

  Backend& device_;
  std::span<const RamFfnLayer> ram_;
  int64_t n_ff_;
  std::vector<DeviceLayer> layers_;
  std::vector<Buffer> buffers_;
  Buffer slots_;  // the device part's slots, [n_ff] int32 in the device's memory
  // The current list, reordered, on the host.
  std::vector<int32_t> ids_, host_slots_;
  std::vector<uint8_t> need_, need_sorted_;
  std::vector<int32_t> sorted_, reordered_;
  int64_t layer_ = 0, count_ = 0, on_device_ = 0, tokens_ = 0;
  int served_ = 0;
  NeuronList list_;
  uint64_t device_pairs_ = 0, ram_pairs_ = 0;
  uint64_t device_rows_ = 0, ram_rows_ = 0, link_bytes_ = 0;
};

}  // namespace strata
