#include "server/metrics.h"

#include <fmt/format.h>

namespace strata {

namespace {

void plain_metric(std::string& out, std::string_view name, const char* type, const char* help,
                  double value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
}

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  plain_metric(out, std::string("strata_") + name, type, help, value);
}

}  // namespace

std::string prometheus_metrics(const SchedulerMetrics& m, const ConnectionStats& c) {
  std::string out;
  const auto d = [](auto v) { return static_cast<double>(v); };
  metric(out, "requests_total", "counter", "Generation requests accepted.", d(m.requests));
  metric(out, "requests_rejected_total", "counter",
         "Generation requests refused with 503 (the queue was full).", d(m.rejected));
  metric(out, "requests_cancelled_total", "counter",
         "Generation requests whose client went away before the end.", d(m.cancelled));
  metric(out, "sequences_finished_total", "counter", "Sequences (choices) that ended.",
         d(m.finished));
  metric(out, "prompt_tokens_total", "counter", "Prompt tokens evaluated (cached ones not).",
         d(m.prompt_tokens));
  metric(out, "generated_tokens_total", "counter", "Tokens generated.", d(m.generated_tokens));
  // Speculative decoding, under strata's names and llama-server's.
  metric(out, "draft_tokens_total", "counter", "Speculative decoding: draft tokens evaluated.",
         d(m.draft_tokens));
  metric(out, "draft_tokens_accepted_total", "counter",
         "Speculative decoding: draft tokens the draws kept.", d(m.draft_accepted));
  metric(out, "draft_steps_total", "counter",
         "Speculative decoding: verification steps (a pending token with a draft).",
         d(m.draft_steps));
  plain_metric(out, "llamacpp:spec_decode_num_draft_tokens_total", "counter",
               "Speculative: Total draft tokens generated", d(m.draft_tokens));
  plain_metric(out, "llamacpp:spec_decode_num_accepted_tokens_total", "counter",
               "Speculative: Total draft tokens accepted by the target model",
               d(m.draft_accepted));
  plain_metric(out, "llamacpp:spec_decode_num_drafts_total", "counter",
               "Speculative: Total speculative decoding verification steps", d(m.draft_steps));
  metric(out, "prompt_seconds_total", "counter",
         "Batch time spent on prompt tokens (a step's time shared out by its tokens).", m.prompt_s);
  metric(out, "decode_seconds_total", "counter",
         "Batch time spent on generated tokens (a step's time shared out by its tokens).",
         m.decode_s);
  metric(out, "prompt_tokens_per_second", "gauge", "Prompt throughput over the server's life.",
         m.prompt_s > 0 ? d(m.prompt_tokens) / m.prompt_s : 0.0);
  metric(out, "decode_tokens_per_second", "gauge",
         "Aggregate decode throughput over the server's life (all slots together).",
         m.decode_s > 0 ? d(m.generated_tokens) / m.decode_s : 0.0);
  metric(out, "batch_steps_total", "counter", "Batched forward passes.", d(m.steps));
  metric(out, "batch_tokens_total", "counter", "Tokens in all batched forward passes.",
         d(m.step_tokens));
  metric(out, "queue_depth", "gauge", "Requests waiting for a slot.", d(m.queue_depth));
  metric(out, "slots_busy", "gauge", "Slots holding a sequence.", d(m.slots_busy));
  metric(out, "slots", "gauge", "Slots (--parallel).", d(m.slots));
  // What an inference gateway balances on (the Gateway API Inference Extension's model-server
  // protocol: queued requests, running requests, KV-cache utilization as a 0..1 gauge), under
  // strata's names and, so that its endpoint picker's defaults read them, under vLLM's.
  const double kv_use = m.kv_positions > 0 ? d(m.kv_positions_used) / d(m.kv_positions) : 0.0;
  metric(out, "requests_waiting", "gauge", "Requests waiting for a slot (as queue_depth).",
         d(m.queue_depth));
  metric(out, "requests_running", "gauge", "Requests with a sequence in a slot.",
         d(m.running_requests));
  metric(out, "kv_cache_usage_ratio", "gauge",
         "KV-cache positions held by busy slots over all the slots' positions (0..1).", kv_use);
  plain_metric(out, "vllm:num_requests_waiting", "gauge",
               "Requests waiting for a slot (strata_requests_waiting, under vLLM's name).",
               d(m.queue_depth));
  plain_metric(out, "vllm:num_requests_running", "gauge",
               "Requests with a sequence in a slot (strata_requests_running, under vLLM's name).",
               d(m.running_requests));
  plain_metric(out, "vllm:gpu_cache_usage_perc", "gauge",
               "KV-cache utilization, 0..1 (strata_kv_cache_usage_ratio, under vLLM's name; the "
               "cache is wherever the plan put it).",
               kv_use);
  metric(out, "http_connections_idle", "gauge",
         "Connections waiting for their next request, off the workers.", d(c.parked));
  metric(out, "http_workers", "gauge", "HTTP worker threads started.", d(c.workers));
  metric(out, "http_workers_busy", "gauge", "HTTP worker threads serving a request.", d(c.busy));
  return out;
}

nlohmann::json props_json(const ServerProps& p) {
  const SamplerParams& s = p.sampling;
  return {{"default_generation_settings",
           {{"n_ctx", p.slot_context},
            {"params",
             {{"n_predict", p.max_tokens},
              {"temperature", s.temperature},
              {"top_k", s.top_k},
              {"top_p", s.top_p},
              {"min_p", s.min_p},
              {"repeat_penalty", s.repeat_penalty},
              {"repeat_last_n", s.repeat_last_n},
              {"seed", p.seed}}}}},
          {"total_slots", p.total_slots},
          {"model_path", p.model_path},
          {"model_alias", p.model_name},
          {"chat_template", p.chat_template},
          {"modalities", {{"vision", false}, {"audio", false}}},
          {"build_info", "strata"}};
}

nlohmann::json slots_json(const std::vector<SlotStatus>& slots, int64_t slot_context) {
  nlohmann::json out = nlohmann::json::array();
  for (const SlotStatus& s : slots)
    out.push_back({{"id", s.id},
                   {"n_ctx", slot_context},
                   {"state", s.state},
                   {"is_processing", s.state != "idle"},
                   {"request", s.job == 0 ? nlohmann::json() : nlohmann::json(s.job)},
                   {"n_past", s.n_past},
                   {"prompt_tokens", s.prompt_tokens},
                   {"generated_tokens", s.generated}});
  return out;
}

}  // namespace strata
