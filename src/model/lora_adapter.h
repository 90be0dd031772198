// LoRA adapters as llama.cpp reads them (its GGUF adapter files, convert_lora_to_gguf.py's
// layout): general.type "adapter", adapter.type "lora", adapter.lora.alpha, and for each adapted
// matrix W of the base model (its GGUF name N) the pair N.lora_a (A: rank rows of W's inputs)
// and N.lora_b (B: W's outputs rows of rank). A matrix then computes
//   W x + s * B (A x),  s = scale * alpha / rank (scale alone when alpha is 0),
// `scale` the user's (--lora-scaled). Several adapters on one matrix are one pair here: their
// ranks stacked (A's rows, B's columns) with each one's s on its columns, so a product costs
// one low-rank pass whatever the number of adapters. A and B keep the file's values: F16 or
// BF16 where every stacked adapter has that type (half the bytes a token reads), else f32.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/arch/architecture.h"
#include "tensor/matrix.h"

namespace strata {

struct Model;

// An adapter file and the user's scale for it.
struct LoraFile {
  std::string path;
  float scale = 1.0f;
};

// "FILE[:SCALE][,FILE[:SCALE]...]" (llama.cpp's --lora and --lora-scaled lists). A part's text
// after its last ':' is its scale when it reads as a number (a path may hold ':'); with
// `scale_required` (--lora-scaled) every part needs one. Fails naming the bad part.
std::vector<LoraFile> parse_lora_list(std::string_view list, bool scale_required,
                                      const char* flag);

// One matrix's adapters as one low-rank product on the host: W x + B (scale * (A x)), scale
// per column of B (each adapter's s on its rank).
struct LoraPair {
  int64_t rank = 0, n_in = 0, n_out = 0;
  DType type = DType::F32;     // of a, b_t, b and a_t
  std::vector<uint8_t> a;      // rank rows of n_in
  std::vector<uint8_t> b_t;    // rank rows of n_out (B's columns: whole rows add them, long)
  std::vector<uint8_t> b;      // n_out rows of rank: ffn_gate's and ffn_up's, read by neuron
  std::vector<uint8_t> a_t;    // n_in rows of rank (A's columns): ffn_down's, read by neuron
  std::vector<float> scale;    // rank values
  bool present() const { return rank > 0; }
  MatrixView a_view() const { return view(a, rank, n_in); }
  MatrixView b_t_view() const { return view(b_t, rank, n_out); }
  MatrixView b_view() const { return view(b, n_out, rank); }
  MatrixView a_t_view() const { return view(a_t, n_in, rank); }
  uint64_t bytes() const {
    return a.size() + b_t.size() + b.size() + a_t.size() + scale.size() * 4;
  }

 private:
  MatrixView view(const std::vector<uint8_t>& v, int64_t rows, int64_t cols) const;
};

// The matrices an adapter may change, by the layer's roles (q, k, v, output, gate, up, down;
// a fused qkv's pair is split into q, k and v here).
inline constexpr LayerMatrix kLoraRoles[] = {LayerMatrix::AttnQ,      LayerMatrix::AttnK,
                                             LayerMatrix::AttnV,      LayerMatrix::AttnOutput,
                                             LayerMatrix::FfnGate,    LayerMatrix::FfnUp,
                                             LayerMatrix::FfnDown};

struct LoraAdapters {
  std::vector<std::array<LoraPair, kLayerMatrices>> layers;  // by LayerMatrix; empty: none
  LoraPair output;                                           // output.weight's
  std::vector<std::string> files;                            // as loaded, for notes

  bool empty() const { return files.empty(); }
  // The pair of a layer's matrix, or null where no adapter changes it.
  const LoraPair* find(int64_t layer, LayerMatrix role) const;
  const LoraPair* find_output() const { return output.present() ? &output : nullptr; }
  uint64_t bytes() const;
  // How many matrices the adapters change, for notes.
  int64_t matrices() const;
};

// Reads and checks the adapters against the model: the file is an adapter, of the model's
// architecture, every pair complete and shaped as its base matrix. Matrices strata does not
// adapt (token_embd, a mixture's experts, PowerInfer's ffn_down_t) are refused by name; norm
// vectors are skipped, as llama.cpp does. One line naming the file and the problem on error.
LoraAdapters load_lora_adapters(std::span<const LoraFile> files, const Model& model);

}  // namespace strata
