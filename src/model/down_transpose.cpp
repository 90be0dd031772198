#include "model/down_transpose.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "tensor/iq_quantize.h"
#include "tensor/quantize.h"

namespace strata {

namespace {

// The transpose is quantized again; a second rounding of the lattice, ternary and 1- or 2-bit
// unit types would cost as much error as the first (and the lattice search far more time), so
// those are held as Q8_0.
bool requantizes_well(DType t) {
  return !has_iq_quantizer(t) && t != DType::TQ1_0 && t != DType::TQ2_0 && t != DType::Q1_0 &&
         t != DType::Q2_0;
}

}  // namespace

DType transposed_down_type(const MatrixView& down) {
  const DTypeInfo& info = dtype_info(down.type);
  if (info.quantize != nullptr && requantizes_well(down.type) &&
      static_cast<uint64_t>(down.rows) % info.block_size == 0)
    return down.type;
  return static_cast<uint64_t>(down.rows) % kQK == 0 ? DType::Q8_0 : DType::F16;
}

uint64_t transposed_down_bytes(const MatrixView& down) {
  return static_cast<uint64_t>(down.cols) *
         row_bytes(transposed_down_type(down), static_cast<uint64_t>(down.rows));
}

bool column_products_pay(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16;
}

bool column_copies_fuse(std::span<const MatrixView> parts) {
  // transposed_down_type's rows are whole blocks of it, so one type is enough.
  for (const MatrixView& m : parts)
    if (m.data == nullptr || transposed_down_type(m) != transposed_down_type(parts[0]))
      return false;
  return !parts.empty();
}

MatrixView transpose_down(const MatrixView& down, std::vector<uint8_t>& storage) {
  const int64_t n_ff = down.cols, n_embd = down.rows;
  const DType type = transposed_down_type(down);
  MatrixView t{type, nullptr, n_embd, n_ff, row_bytes(type, static_cast<uint64_t>(n_embd))};
  storage.assign(transposed_down_bytes(down), 0);
  t.data = storage.data();
  const int64_t elem = down.type == DType::F32 ? 4 : 2;
  switch (down.type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: {
      // Blocked so both sides stay in cache.
      constexpr int64_t kTile = 64;
      for (int64_t r0 = 0; r0 < n_embd; r0 += kTile)
        for (int64_t c0 = 0; c0 < n_ff; c0 += kTile)
          for (int64_t r = r0; r < std::min(n_embd, r0 + kTile); ++r)
            for (int64_t c = c0; c < std::min(n_ff, c0 + kTile); ++c)
              std::memcpy(storage.data() + c * t.row_bytes + r * elem, down.row(r) + c * elem,
                          static_cast<size_t>(elem));
      break;
    }
    default: {
      // Every other type strata reads: the whole matrix as floats once (n_embd x n_ff), then
      // one quantized row per neuron.
      if (dtype_info(down.type).dequantize == nullptr)
        fail("cannot transpose a {} down projection", dtype_name(down.type));
      std::vector<float> all(static_cast<size_t>(n_embd * n_ff)), col(static_cast<size_t>(n_embd));
      for (int64_t r = 0; r < n_embd; ++r)
        dequantize_row(down.type, down.row(r), all.data() + r * n_ff, n_ff);
      for (int64_t c = 0; c < n_ff; ++c) {
        for (int64_t r = 0; r < n_embd; ++r)
          col[static_cast<size_t>(r)] = all[static_cast<size_t>(r * n_ff + c)];
        quantize_row(type, col.data(), storage.data() + c * t.row_bytes, n_embd);
      }
      break;
    }
  }
  return t;
}

uint64_t transposed_expert_downs_bytes(std::span<const MatrixView> downs) {
  uint64_t bytes = 0;
  for (const MatrixView& d : downs) bytes += transposed_down_bytes(d);
  return bytes;
}

MatrixView transpose_expert_downs(std::span<const MatrixView> downs,
                                  std::vector<uint8_t>& storage) {
  if (downs.empty()) fail("a mixture without experts has no down projection to transpose");
  for (const MatrixView& d : downs)
    if (d.type != downs[0].type || d.rows != downs[0].rows || d.cols != downs[0].cols)
      fail("the experts' down projections differ in type or shape ({} {}x{} and {} {}x{})",
           dtype_name(downs[0].type), downs[0].rows, downs[0].cols, dtype_name(d.type), d.rows,
           d.cols);
  storage.assign(transposed_expert_downs_bytes(downs), 0);
  std::vector<uint8_t> one;
  MatrixView all{};
  uint64_t at = 0;
  for (const MatrixView& d : downs) {
    const MatrixView t = transpose_down(d, one);
    std::memcpy(storage.data() + at, t.data, t.bytes());
    at += t.bytes();
    all = t;
  }
  all.data = storage.data();
  all.rows = downs[0].cols * static_cast<int64_t>(downs.size());
  return all;
}

}  // namespace strata
