// llama.cpp's -hf user/repo[:quant] (--hf-repo) on the commands that load a model, and `strata
// pull`: the GGUF file pulled into the cache (offline/model_pull.h) with a progress bar, its
// path used as -m. The host is $HF_ENDPOINT where set (as llama.cpp reads it), else Hugging Face.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace strata {

struct HfFlag {
  std::string repo;
  CLI::Option* model_option = nullptr;  // -m: given together with -hf is refused
};

void add_hf_flag(CLI::App* cmd, HfFlag& flag, CLI::Option* model_option);

// The model -hf names, pulled (or found complete in the cache), in place of `model`; nothing
// without -hf. Fails when -m was given as well.
void use_hf_model(const HfFlag& flag, std::string& model);

// Pulls user/repo[:quant] with a progress bar on stderr; the local path.
std::string pull_with_progress(const std::string& spec, const std::string& revision = "main");

}  // namespace strata
