// A loaded model: the mapped GGUF file, its config, weight views and tokenizer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/anonymous_memory.h"
#include "format/gguf.h"
#include "model/config.h"
#include "model/input_thresholds.h"
#include "model/lora_adapter.h"
#include "model/tokenizer.h"
#include "model/weights.h"

namespace strata {

// A layer's matrices transposed, so that column j of W (the weights input value j meets) is one
// contiguous row: what input-sparse products (TEAL) read, only the rows of the non-zero inputs.
// ffn_down's is the layer's ffn_down_t.
// A layer's column-major copies for input-sparse products (Model::ensure_input_columns). The
// matrices that read one input are fused where their transposed types allow: attn_qkv's row j
// is column j of q, then of k, then of v (gate_up: gate's, then up's), so an input's columns are
// one long read; the parts' own views are then empty (data null). ffn_down is the layer's
// ffn_down_t (float types). Q8_0, Q4_K and Q6_K matrices' copies are column groups
// (Layout::ColumnGroups, tensor/column_groups.h: the file's values and scales regrouped by 32
// inputs, ffn_down's too; a q/k/v of two types, as Q4_K_M's Q6_K attn_v, one copy per part that
// has one). A matrix whose column products do not pay (column_products_pay: the other quantized
// types) has no copy: its input's products stay row-major.
struct LayerColumns {
  MatrixView attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down;
  MatrixView attn_qkv, ffn_gate_up;
  // Whether each input's products have their copies.
  bool attention() const {
    return attn_qkv.data != nullptr ||
           (attn_q.data != nullptr && attn_k.data != nullptr && attn_v.data != nullptr);
  }
  bool ffn(bool gated) const {
    return ffn_gate_up.data != nullptr ||
           (ffn_up.data != nullptr && (!gated || ffn_gate.data != nullptr));
  }
};

struct Model {
  std::unique_ptr<GgufFile> file;
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;  // null when the file has no tokenizer metadata
  InputThresholds sparsity;              // empty unless `strata sparsify` calibrated the file
  LoraAdapters lora;                     // --lora: applied by every product they change

  // Opens and validates everything; throws Error with a one-line message on any problem.
  // LoadMode::Read (the default) copies the file into huge-page memory for faster decode;
  // LoadMode::Map uses it in place (--mmap).
  static std::unique_ptr<Model> load(const std::string& path, bool require_tokenizer = true,
                                     LoadMode mode = LoadMode::Read);

  // The byte ranges of the file that stay on flash (a bundled model's FFN bundles and its
  // embedding table unless the output head shares it): Model::load leaves them unread.
  MappedFile::Ranges flash_ranges() const;

  // Gives every layer an ffn_down_t (the sparse FFN needs one), transposing ffn_down where the
  // file lacks it. Returns the bytes allocated for that (0 when the file has them).
  uint64_t ensure_down_t();

  // Fills `columns` (and ffn_down_t) for input-sparse products: every layer's attention and
  // gate/up matrices transposed (model/down_transpose.h: float types exactly), Q8_0, Q4_K, Q6_K
  // ones (and ffn_down) as column groups (model/column_group_copy.h). Returns the bytes allocated;
  // before adopt_layouts.
  uint64_t ensure_input_columns();
  // The bytes ensure_input_columns allocates for a layer (with its ffn_down_t where it lacks one).
  static uint64_t input_column_bytes(const LayerWeights& l);
  // The bytes of every copy a layer's LayerColumns names (a file's ffn_down_t included): what a
  // device that computes the layer uploads.
  static uint64_t column_copies_bytes(const LayerWeights& l);
  std::vector<LayerColumns> columns;  // per layer; empty until ensure_input_columns

  // Gives each matrix the layout the backend that computes with it prefers (Backend::
  // preferred_layout), by how the run uses it: the attention projections, the predictors and
  // the output (unless tied to the embedding) are multiplied whole, and so are gate/up/down
  // when `dense_ffn` (otherwise they are read row by row). The only re-layout today is the CPU
  // backend's Q4_0/Q8_0 interleaving (tensor/interleaved_rows.h): in place, no memory, only for
  // models loaded with LoadMode::Read (a mapped file's pages are the page cache's). Returns the
  // matrices changed.
  using LayoutChoice = std::function<Layout(const MatrixView&, WeightUse)>;
  int adopt_layouts(const LayoutChoice& choose, bool dense_ffn);

 private:
  // Storage of tensors built at load time, in transparent huge pages as the file's weights are
  // (decode reads them like the file's: with 4 KiB pages, TLB misses).
  std::vector<AnonymousMemory> derived_;
};

}  // namespace strata
