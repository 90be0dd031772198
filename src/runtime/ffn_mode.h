// How the FFN is computed.
//   dense:      every neuron (the reference).
//   predict:    the layer's predictor picks neurons; gate/up rows and ffn_down_t rows are
//               computed for those only. Approximate where the predictor misses a neuron.
//   gate-first: ReGLU/dReLU/ReLU only: the gate (up for ReLU) is computed densely, then up and
//               down only where it fired. Exact, no predictor needed, saves up to 2/3 of the FFN.
#pragma once

namespace strata {

enum class FfnMode { Dense, Predict, GateFirst };
const char* ffn_mode_name(FfnMode m);

}  // namespace strata
