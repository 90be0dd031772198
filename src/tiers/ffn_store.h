// Where a layer's FFN neurons are held, apart from which neurons a batch computes: given the
// selected neurons, a store hands out segments, each a set of those neurons in one place
// (device, gate/up/down_t row views, the row of each neuron in them). The FFN executor
// computes segment after segment; partial sums stay in bucket order by neuron id
// (backends/backend.h), so any split of the neurons across segments or stores gives the same
// bits. RAM matrices and the flash tier's neuron caches are stores; so is the split between a
// device's hot set and either of them (split_ffn_store.h), which copies its neurons' rows out
// of the store below it.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "tensor/device.h"
#include "tensor/matrix.h"

namespace strata {

// The selection as a store sees it: ascending neuron ids and, per token, whether it needs
// each (need[b * need_stride + k] for the k-th id). A store may reorder both together.
struct NeuronList {
  int32_t* ids = nullptr;
  int64_t count = 0;
  uint8_t* need = nullptr;
  int64_t need_stride = 0;
  int64_t tokens = 0;
};

struct FfnSegment {
  Device device = Device::Host;
  MatrixView gate, up, down_t;       // row views (rows: neuron ids or cache slots)
  std::span<const int32_t> rows;     // per neuron of the segment: its row in the views
  std::span<const int32_t> neurons;  // the neuron ids when rows are not ids; empty otherwise
  int64_t begin = 0, end = 0;        // the segment's entries [begin, end) of the NeuronList
  bool partial = false;              // split reads: only the deciding row is valid yet
  // The need matrix the segment's device reads ([tokens][need_stride], entries [begin, end)):
  // null, the list's; a host copy for a RAM segment of a list that lives on a device (split
  // reads clear the entries of neurons that turn out zero, so it is writable).
  uint8_t* need = nullptr;
};

// A layer's gate, up and down_t rows as a store holds them: type, width and row bytes (the
// views' data is not set). No gate: plain ReLU models.
struct NeuronRowShapes {
  bool has_gate = true;
  MatrixView gate, up, down_t;
  uint64_t neuron_bytes() const {
    return (has_gate ? gate.row_bytes : 0) + up.row_bytes + down_t.row_bytes;
  }
};

class FfnStore {
 public:
  virtual ~FfnStore() = default;
  virtual const char* name() const = 0;
  // Element types of the layer's gate and up rows (what the input is prepared for).
  struct RowTypes {
    DType gate, up;
  };
  RowTypes row_types(int64_t layer) const {
    const NeuronRowShapes s = row_shapes(layer);
    return {s.has_gate ? s.gate.type : s.up.type, s.up.type};
  }
  // Starts serving `list` for layer `layer` to a batch whose last token is number `token`.
  virtual void begin(int64_t layer, NeuronList& list, int64_t token) = 0;
  // The next segment; false when every neuron of the list has been served. A segment's rows
  // stay valid until the next call.
  virtual bool next(FfnSegment& segment) = 0;
  // Split reads: completes the partial segment's neurons among `active` (ascending) and drops
  // the others (their output is zero whatever the rest of their rows holds); rows move.
  virtual void refine(FfnSegment& segment, std::span<const int32_t> active) {}
  // Look-ahead: starts making `ids` resident for `layer` in the background (best effort).
  virtual bool can_prefetch() const { return false; }
  virtual void prefetch(int64_t layer, std::span<const int32_t> ids, int64_t token) {}
  // For a faster tier that takes some neurons over (a device's hot set): the layer's row
  // shapes, and the rows of `ids` (ascending) copied packed in list order, each matrix's
  // row_bytes apart (gate skipped without a gate). Not while a layer is being served.
  virtual NeuronRowShapes row_shapes(int64_t layer) const = 0;
  virtual void copy_rows(int64_t layer, std::span<const int32_t> ids, uint8_t* gate, uint8_t* up,
                         uint8_t* down_t) = 0;
};

// The FFN in RAM matrices: one segment, rows = neuron ids.
struct RamFfnLayer {
  MatrixView gate, up, down_t;
};

class RamFfnStore final : public FfnStore {
 public:
  explicit RamFfnStore(std::span<const RamFfnLayer> layers) : layers_(layers) {}
  const char* name() const override { return "ram"; }
  void begin(int64_t layer, NeuronList& list, int64_t) override {
    layer_ = layer;
    list_ = list;
    served_ = false;
  }
  bool next(FfnSegment& s) override {
    if (served_) return false;
    const RamFfnLayer& l = layers_[static_cast<size_t>(layer_)];
    s = FfnSegment{Device::Host,
                   l.gate,
                   l.up,
                   l.down_t,
                   std::span<const int32_t>(list_.ids, static_cast<size_t>(list_.count)),
                   {},
                   0,
                   list_.count,
                   false};
    served_ = true;
    return true;
  }
  NeuronRowShapes row_shapes(int64_t layer) const override {
    const RamFfnLayer& l = layers_[static_cast<size_t>(layer)];
    NeuronRowShapes r{l.gate.data != nullptr, l.gate, l.up, l.down_t};
    r.gate.data = r.up.data = r.down_t.data = nullptr;
    return r;
  }
  void copy_rows(int64_t layer, std::span<const int32_t> ids, uint8_t* gate, uint8_t* up,
                 uint8_t* down_t) override {
    const RamFfnLayer& l = layers_[static_cast<size_t>(layer)];
    const auto copy = [&](const MatrixView& m, uint8_t* out) {
      for (size_t k = 0; k < ids.size(); ++k)
        std::memcpy(out + k * m.row_bytes, m.row(ids[k]), m.row_bytes);
    };
    if (l.gate.data != nullptr) copy(l.gate, gate);
    copy(l.up, up);
    copy(l.down_t, down_t);
  }

 private:
  std::span<const RamFfnLayer> layers_;
  int64_t layer_ = 0;
  NeuronList list_;
  bool served_ = false;
};

}  // namespace strata
