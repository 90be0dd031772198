// Getting a model as llama.cpp's -hf does: a GGUF file of a Hugging Face repository (or of a host
// that serves the same API), chosen by its quantization tag, downloaded into strata's cache with
// resume after a cut, and checked against the size and SHA-256 the host publishes before it is
// used. The choice and the names are pure functions; pull_model does the HTTP.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strata {

// user/repo[:tag], as llama.cpp's -hf takes it; tag: a quantization such as Q4_K_M (any case).
struct PullSpec {
  std::string repo;
  std::string tag;
};
PullSpec parse_pull_spec(const std::string& spec);  // Error naming what is wrong

// One file of a repository as the host's tree API lists it (LFS files carry their SHA-256).
struct HubFile {
  std::string path;
  uint64_t size = 0;
  std::string sha256;  // empty when the host gives none
};
// GET /api/models/{repo}/tree/{revision}: [{"type": "file", "path", "size", "lfs": {"oid", "size"}}].
std::vector<HubFile> parse_hub_tree(const nlohmann::json& tree);

// The GGUF file for `tag`: the one whose name holds it (Q4_K_M matches "-Q4_K_M.gguf", not
// "Q4_K_M_L"); without a tag llama.cpp's default, Q4_K_M, else the only GGUF file. Projector
// files (mmproj) are never the model. Error listing the files there are when none or several
// fit, or when the model is split into parts.
HubFile choose_gguf(const std::vector<HubFile>& files, const std::string& tag);

// Where pulled files live: $STRATA_CACHE, else $XDG_CACHE_HOME/strata, else ~/.cache/strata.
std::string default_pull_cache();
// The cached file of a repository's file: "<cache>/<user>_<repo>_<file>".
std::string pulled_path(const std::string& cache, const std::string& repo, const std::string& file);

struct PullOptions {
  std::string host = "https://huggingface.co";
  std::string cache;     // empty: default_pull_cache()
  std::string revision = "main";
  std::string token;     // empty: $HF_TOKEN
  // Called as bytes arrive (done counts what a resumed .part already held).
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// The local path of the model: the cached file if it is complete, else downloaded now (a .part
// left by a cut is resumed with a Range request), its size and SHA-256 checked before it is
// renamed into place. Error naming the host's answer, a cut (the .part kept for the next try),
// or a mismatch (the .part removed).
std::string pull_model(const PullSpec& spec, const PullOptions& options);

}  // namespace strata
