// llama.cpp's logits for given token ids, one JSON row per position: the oracle of
// bench/llamacpp/run_all.sh. Built by that script against a llama.cpp build outside this
// repository (never by strata's CMake). KV_F32=1: an F32 KV cache without flash attention
// (llama.cpp's default is an F16 cache).
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: dump_logits MODEL ID,ID,...\n");
    return 2;
  }
  std::vector<llama_token> tokens;
  for (char* p = argv[2]; *p;) {
    tokens.push_back(static_cast<llama_token>(strtol(p, &p, 10)));
    if (*p == ',') ++p;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (model == nullptr) {
    fprintf(stderr, "error: llama.cpp could not load '%s'\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = tokens.size() + 8 > 256 ? tokens.size() + 8 : 256;
  cp.n_batch = cp.n_ubatch = cp.n_ctx;
  cp.n_threads = cp.n_threads_batch = 2;
  if (getenv("KV_F32") != nullptr) {
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  llama_batch batch = llama_batch_init(static_cast<int32_t>(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(tokens.size());
  if (llama_decode(ctx, batch) != 0) {
    fprintf(stderr, "error: llama_decode failed\n");
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  printf("[");
  for (size_t i = 0; i < tokens.size(); ++i) {
    const float* row = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
    printf(i ? ",[" : "[");
    for (int j = 0; j < n_vocab; ++j) printf(j ? ",%.9g" : "%.9g", row[j]);
    printf("]");
  }
  printf("]\n");
  return 0;
}
