// A session's FFN report as JSON: the mode, density per layer (with --check-predictor the
// predictor's recall and precision), input sparsity's kept values, the flash tier's reads, a
// split FFN's shares and traffic, and where the time went. The CLI prints it as text or JSON.
#pragma once

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "runtime/session.h"

namespace strata {

nlohmann::json ffn_report_json(const Model& model, const Session& session);

}  // namespace strata
