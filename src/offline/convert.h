// Converts a Hugging Face checkpoint directory (config.json, *.safetensors single or sharded,
// tokenizer.model or tokenizer.json) of a LLaMA-family model into a GGUF file with llama.cpp's
// tensor names. Weights stream one tensor at a time: memory stays near the largest tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "offline/quant_recipe.h"

namespace strata {

struct ConvertOptions {
  std::string input_dir;
  std::string output;
  // The matrices' types (offline/quant_recipe.h: F16, Q8_0, Q4_K_M, ...); norms stay F32.
  QuantRecipe recipe = QuantRecipe::F16;
  std::string name;  // general.name; default: the directory's name
};

struct ConvertProgress {
  int64_t tensors_done, tensors_total;
  uint64_t bytes_done, bytes_total;  // of input tensor data
};

void convert_hf_to_gguf(const ConvertOptions& options,
                        const std::function<void(const ConvertProgress&)>& progress = {});

}  // namespace strata
