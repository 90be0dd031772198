// Builds ffn_down_t (n_ff rows of n_embd) from a row-major ffn_down (n_embd rows of n_ff) for
// files that lack it, so the sparse FFN modes run on any llama.cpp file. Float types transpose
// exactly; Q8_0/Q4_0 and the K-quants are dequantized and re-quantized along the new rows
// (blocks run along a row, so a transposed block is a different set of values): close to, not
// equal to, the stored weights. A K-quant whose new rows (n_embd values) are not whole 256-value
// super-blocks becomes Q8_0 (F16 when not whole 32-value blocks either). `strata train-predictors`
// writes ffn_down_t from the source values instead.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor/matrix.h"

namespace strata {

// Returns a view of `storage`, which it fills.
MatrixView transpose_down(const MatrixView& down, std::vector<uint8_t>& storage);
// The type of the transposed rows.
DType transposed_down_type(const MatrixView& down);
// Bytes transpose_down allocates for `down`.
uint64_t transposed_down_bytes(const MatrixView& down);
// Whether the transposed copies of matrices that read one input can be one matrix (each input's
// row the parts' rows back to back; LayerColumns): every part is there, all transpose to one
// type, and each part's transposed rows are whole blocks of it (so their bytes simply follow
// each other). Measured on a 1B F16 GQA model at 50% sparsity: separate q/k/v column products
// (k and v rows of 256 values) took as long as the dense attention (8.4 against 8.2 ms a token).
bool column_copies_fuse(std::span<const MatrixView> parts);
// Whether input-sparse products through a transposed copy of `type` (transposed_down_type) beat
// the dense product of the row-major matrix: the CPU's axpy kernels keep pace with its dot
// kernels for float rows only. For the quantized types they dequantize value by value where the
// dot kernels use int8 dot products (bench/input_sparsity.sh, 2 threads, decode at 40%/50%
// against dense: 1B Q8_0 1.12x/1.06x and 1.04x/0.84x in two sessions' runs, 7B Q8_0
// 0.91x/1.06x; 1B Q4_K_M 0.26x/0.30x; BM_InputColumns Q4_K 6 GB/s against 37 for its dense
// product). Q8_0, Q4_K and Q6_K get column groups instead (model/column_group_copy.h: int8
// products).
bool column_products_pay(DType type);
// A mixture's experts' down projections (each n_embd rows of n_ff) as one ffn_down_t of
// downs.size() * n_ff rows, expert e's neurons at rows [e * n_ff, (e + 1) * n_ff): the layer
// seen as one FFN (ModelConfig::ffn_neurons). Fails if the experts' types differ.
MatrixView transpose_expert_downs(std::span<const MatrixView> downs, std::vector<uint8_t>& storage);
uint64_t transposed_expert_downs_bytes(std::span<const MatrixView> downs);

}  // namespace strata
