// The server's /metrics (Prometheus text exposition format 0.0.4) and /slots (JSON) bodies,
// from the scheduler's and the connection layer's counters: pure functions of the figures.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/batch_scheduler.h"
#include "server/guarded_http.h"

namespace strata {

std::string prometheus_metrics(const SchedulerMetrics& m, const ConnectionStats& c);
nlohmann::json slots_json(const std::vector<SlotStatus>& slots, int64_t slot_context);

}  // namespace strata
