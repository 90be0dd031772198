// LoRA adapters as llama.cpp reads them (its GGUF adapter files, convert_lora_to_gguf.py's
// layout): general.type "adapter", adapter.type "lora", adapter.lora.alpha, and for each adapted
// matrix W of the base model (its GGUF name N) the pair N.lora_a (A: rank rows of W's inputs)
// and N.lora_b (B: W's outputs rows of rank). A matrix then computes
//   W x + s * B (A x),  s = scale * alpha / rank (scale alone when alpha is 0),
// `scale` the user's (--lora-scaled). Several adapters on one matrix are one pair here: their
// ranks stacked (A's rows, B's columns) and each one's s folded into its columns of B, so a
// product costs one low-rank pass whatever the number of adapters.
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

// One matrix's adapters as one low-rank product, in f32 on the host.
struct LoraPair {
  int64_t rank = 0, n_in = 0, n_out = 0;
  std::vector<float> a;    // rank rows of n_in
  std::vector<float> b;    // n_out rows of rank, each adapter's s folded in
  std::vector<float> a_t;  // n_in rows of rank (A's columns): ffn_down's, read by neuron
  bool present() const { return rank > 0; }
  MatrixView a_view() const { return view(a, rank, n_in); }
  MatrixView b_view() const { return view(b, n_out, rank); }
  MatrixView a_t_view() const { return view(a_t, n_in, rank); }
  uint64_t bytes() const { return (a.size() + b.size() + a_t.size()) * sizeof(float); }

 private:
  static MatrixView view(const std::vector<float>& v, int64_t rows, int64_t cols);
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
