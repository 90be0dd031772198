#include "model/flash_route.h"

namespace strata {

std::string flash_route(const ModelConfig& c, bool has_predictors) {
  if (ffn_is_relu_family(c.ffn)) {
    if (has_predictors) return "`strata bundle -m FILE -o BUNDLED.gguf` keeps the FFN on flash";
    return "`strata train-predictors -m FILE -f TEXT -o P.gguf`, then `strata bundle -m P.gguf "
           "-o BUNDLED.gguf` keep the FFN on flash";
  }
  if (c.moe())
    return "a mixture of " + std::string(ffn_activation_name(c.ffn)) +
           " experts has no flash route yet: --mmap pages the file (slower)";
  return "`strata sparsify -m FILE -f TEXT --sparsity 0.5 -o S.gguf`, then `strata bundle "
         "--columns -m S.gguf -o BUNDLED.gguf` and runs with `--sparsity-mode teal --sparsity "
         "0.5` keep the FFN on flash";
}

}  // namespace strata
