// llama-server's own /completion (what its web UI, llama.cpp's examples and many scripts call):
// the request is an OpenAI completion body with llama.cpp's names (prompt as text or token ids,
// n_predict, grammar, json_schema, ...), the reply llama-server's {"content", "stop",
// "stop_type", "stopping_word", "tokens_predicted", "tokens_evaluated", "timings", ...}, streamed
// as server-sent events of {"content", "stop": false} ending in the whole object with
// "stop": true (no [DONE], as llama-server). Its sampler fields strata does not run (mirostat,
// typical_p, DRY, XTC, ...) are refused by name when set away from their defaults. /infill is
// the same with a fill-in-the-middle prompt.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "model/tokenizer.h"
#include "server/reply_dialect.h"

namespace strata {

// ApiError (400) naming a llama-server field set to what strata does not do.
void check_llama_completion_fields(const nlohmann::json& body);

nlohmann::json llama_completion_reply(const CompletionRequest& req, const CompletionIds& ids,
                                      const GenerationResult& result);

std::shared_ptr<const ReplyDialect> llama_completion_dialect();

// llama-server's /infill prompt: [BOS] [FIM_PRE] input_prefix [FIM_SUF] input_suffix [FIM_MID]
// prompt (suffix first with "spm_infill"), prefix and suffix tokenized as plain text, the prompt
// with control tokens parsed, as llama-server builds it. ApiError (400) naming the field: a
// model without fill-in-the-middle tokens, input_extra (repository context), a non-string part.
std::vector<int32_t> infill_tokens(const Tokenizer& tokenizer, const nlohmann::json& body);

}  // namespace strata
