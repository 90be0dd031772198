// strata quantize: rewrites a GGUF model (llama.cpp's or PowerInfer's, F32/F16/BF16 weights)
// with the types a recipe chooses (offline/quant_recipe.h). Streams one tensor at a time from
// the mapped input to "OUT.tmp", renamed when complete: memory stays near the largest output
// tensor. PowerInfer files keep their magic, ffn_down_t and predictors; bundled files (strata
// bundle) stay bundled, each neuron's bundle requantized in place of its rows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "offline/quant_recipe.h"

namespace strata {

struct QuantizeOptions {
  std::string input, output;
  QuantRecipe recipe = QuantRecipe::Q4_K_M;
  bool pure = false;
  bool quantize_predictors = false;
  int threads = 1;
  TypeOverrides overrides = {};  // --output-tensor-type, --token-embedding-type, --tensor-type
  std::string imatrix = {};      // --imatrix: llama-imatrix's file (GGUF or legacy), may be empty
};

struct QuantizeReport {
  uint64_t input_bytes = 0, output_bytes = 0;  // tensor data
  int64_t tensors = 0;
  int64_t by_type[64] = {};  // tensor count per GGUF type id
  int64_t weighted = 0;      // tensors quantized with an importance from the imatrix
};

QuantizeReport quantize_model(const QuantizeOptions& options,
                              const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace strata
