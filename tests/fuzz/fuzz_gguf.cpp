// GGUF reader and model load on arbitrary bytes: a file either loads (and then a session
// evaluates two tokens on it, and its tokenizer encodes and decodes a text) or fails with
// strata::Error. Anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "core/thread_pool.h"
#include "fuzz_util.h"
#include "model/model.h"
#include "runtime/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static strata::ThreadPool pool(1);
  const strata::fuzz::MemFile file(data, size);
  try {
    const auto model =
        strata::Model::load(file.path(), /*require_tokenizer=*/false, strata::LoadMode::Map);
    if (model->tokenizer) {
      const auto ids = model->tokenizer->encode("In the beginning <0x41>", true, true);
      model->tokenizer->decode(ids);
    }
    if (model->config.n_embd * model->config.n_layer <= (int64_t{1} << 20)) {
      strata::Session session(*model, 4, pool);
      const int32_t tokens[2] = {0, static_cast<int32_t>(model->config.n_vocab - 1)};
      session.eval(tokens);
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
