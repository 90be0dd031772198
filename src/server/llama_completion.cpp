#include "server/llama_completion.h"

#include <fmt/format.h>

#include <vector>

namespace strata {

using nlohmann::json;

namespace {

// Fields llama-server takes with the value that leaves them off.
const std::pair<const char*, json> kIdleFields[] = {
    {"mirostat", 0},         {"typical_p", 1.0},       {"tfs_z", 1.0},          {"dry_multiplier", 0.0},
    {"xtc_probability", 0.0}, {"ignore_eos", false},   {"cache_prompt", true},  {"n_probs", 0},
    {"n_keep", 0},           {"id_slot", -1},          {"return_tokens", false}, {"post_sampling_probs", false},
    {"n_indent", 0},         {"t_max_predict_ms", 0}, {"top_n_sigma", -1.0},   {"dynatemp_range", 0.0}};

std::string stop_type(const GenerationResult& r) {
  if (r.finish_reason == "length") return "limit";
  return r.stopping_word.empty() ? "eos" : "word";
}

class LlamaCompletionDialect final : public ReplyDialect {
 public:
  json whole(const CompletionRequest& req, const CompletionIds& ids, std::span<const GenerationResult> results,
             const TokenText&) const override {
    return llama_completion_reply(req, ids, results.front());
  }
  bool stream(const CompletionRequest& req, JobHandle& job, const CompletionIds& ids, httplib::DataSink& sink,
              const StreamContext& context) const override {
    auto send = [&](const json& j) {
      const std::string event = "data: " + dump_json(j) + "\n\n";
      return sink.write(event.data(), event.size());
    };
    std::vector<JobHandle::Piece> pieces;
    bool done = false;
    while (!done) {
      done = job.wait(pieces, std::chrono::milliseconds(10));
      for (const JobHandle::Piece& p : pieces)
        if (!send({{"index", 0}, {"content", p.text}, {"tokens", json::array()}, {"stop", false}, {"id_slot", -1}}))
          return false;
      pieces.clear();
      if (!done && context.abandoned()) {
        if (context.stopping()) send(error_body(503, "the server is stopping; the generation was cut"));
        return false;
      }
    }
    if (const GenerationResult* failed = job.first_failure()) {
      send(failed->request_fault ? error_body(400, failed->error, req.grammar_param)
                                 : error_body(500, "internal error: " + failed->error));
      return false;
    }
    json last = llama_completion_reply(req, ids, job.results().front());
    last["content"] = "";  // sent already
    if (!send(last)) return false;
    sink.done();
    return true;
  }
};

}  // namespace

void check_llama_completion_fields(const json& body) {
  if (!body.is_object()) return;  // parse_completion_request names it
  for (const auto& [key, idle] : kIdleFields)
    if (body.contains(key) && !body[key].is_null() && body[key] != idle)
      throw ApiError(400, fmt::format("'{}' {} is not supported (strata's samplers: temperature, top_k, top_p, "
                                      "min_p, repeat, presence and frequency penalties, logit_bias, grammar)",
                                      key, body[key].dump()),
                     key);
  for (const char* key : {"samplers", "lora", "image_data", "input_extra", "response_fields"})
    if (body.contains(key) && !body[key].is_null())
      throw ApiError(400, fmt::format("'{}' is not supported", key), key);
}

json llama_completion_reply(const CompletionRequest& req, const CompletionIds& ids, const GenerationResult& r) {
  const GenerationParams& g = req.generation;
  return {{"index", 0},
          {"content", r.text},
          {"tokens", json::array()},
          {"id_slot", -1},
          {"stop", true},
          {"model", ids.model},
          {"tokens_predicted", r.completion_tokens},
          {"tokens_evaluated", r.prompt_tokens},
          {"tokens_cached", r.cached_tokens},
          {"prompt", req.prompt},
          {"has_new_line", r.text.find('\n') != std::string::npos},
          {"truncated", false},
          {"stop_type", stop_type(r)},
          {"stopping_word", r.stopping_word},
          {"generation_settings", {{"n_predict", g.max_tokens}, {"temperature", g.sampling.temperature},
                                   {"top_k", g.sampling.top_k}, {"top_p", g.sampling.top_p},
                                   {"min_p", g.sampling.min_p}, {"seed", g.sampling.seed}, {"stop", g.stop}}},
          {"timings", timings_json(std::span<const GenerationResult>(&r, 1))}};
}

std::vector<int32_t> infill_tokens(const Tokenizer& tok, const json& body) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  const Tokenizer::FimTokens& fim = tok.fim();
  if (!fim.complete())
    throw ApiError(400, "the model has no fill-in-the-middle tokens (tokenizer.ggml.fim_pre_token_id, "
                        "fim_suf_token_id, fim_mid_token_id)");
  const auto text = [&](const char* key) {
    if (!body.contains(key) || body[key].is_null()) return std::string();
    if (!body[key].is_string()) throw ApiError(400, fmt::format("'{}' must be a string", key), key);
    return body[key].get<std::string>();
  };
  if (body.contains("input_extra") && !(body["input_extra"].is_array() && body["input_extra"].empty()) &&
      !body["input_extra"].is_null())
    throw ApiError(400, "'input_extra' (other files as context) is not supported", "input_extra");
  const bool spm = body.contains("spm_infill") && body["spm_infill"].is_boolean() && body["spm_infill"].get<bool>();
  std::vector<int32_t> prefix{fim.pre}, suffix{fim.suf};
  const auto append = [](std::vector<int32_t>& to, const std::vector<int32_t>& more) {
    to.insert(to.end(), more.begin(), more.end());
  };
  append(prefix, tok.encode(text("input_prefix"), false, false));
  append(suffix, tok.encode(text("input_suffix"), false, false));
  std::vector<int32_t> out;
  if (tok.add_bos_default() && tok.bos() >= 0) out.push_back(tok.bos());
  append(out, spm ? suffix : prefix);
  append(out, spm ? prefix : suffix);
  out.push_back(fim.mid);
  append(out, tok.encode(text("prompt"), false, true));
  return out;
}

std::shared_ptr<const ReplyDialect> llama_completion_dialect() {
  static const auto d = std::make_shared<const LlamaCompletionDialect>();
  return d;
}

}  // namespace strata
