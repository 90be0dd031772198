// The server's /metrics (Prometheus text exposition format 0.0.4) and /slots (JSON) bodies,
// from the scheduler's and the connection layer's counters: pure functions of the figures.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generation/batch_scheduler.h"
#include "server/guarded_http.h"

namespace strata {

std::string prometheus_metrics(const SchedulerMetrics& m, const ConnectionStats& c);
nlohmann::json slots_json(const std::vector<SlotStatus>& slots, int64_t slot_context);

// llama-server's GET /props: the defaults a request without its own fields gets (with the
// slots' context), the slot count, the model's path and name, its chat template
// (the Jinja source in use: the file's tokenizer.chat_template, --chat-template's, or the plain
// transcript's) and what built strata.
struct ServerProps {
  std::string model_path, model_name, chat_template;
  int64_t total_slots = 1, slot_context = 0, max_tokens = -1;
  SamplerParams sampling;
  int64_t seed = -1;  // the default seed; -1: one drawn for each request
};
nlohmann::json props_json(const ServerProps& props);

}  // namespace strata
