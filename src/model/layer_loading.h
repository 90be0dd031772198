// A layer's tensors read by its architecture's lists (model/arch/): norms and biases, the
// attention's projections (a fused q/k/v as row views), the dense FFN or the mixture's experts,
// each with the per-tensor scale its family's graph applies, and PowerInfer's predictors.
// model/weights.cpp calls these per layer; bundled FFNs have their own loaders there.
#pragma once

#include <string>
#include <vector>

#include "model/tensor_scales.h"
#include "model/tensor_source.h"
#include "model/weights.h"

namespace strata {

void load_layer_vectors(TensorSource& f, const Architecture& a, const std::string& p,
                        const ModelConfig& c, LayerWeights& l);
void load_attention(TensorSource& f, ScaleContext& sc, const Architecture& a, const std::string& p,
                    const ModelConfig& c, LayerWeights& l);
// Layer `layer`'s dense FFN (gate, up, down and/or ffn_down_t) or the mixture's router and
// experts (a mixture's leading dense layer: its FFN as the layer's shared expert).
void load_ffn(TensorSource& f, ScaleContext& sc, const Architecture& a, const std::string& p,
              int64_t layer, const ModelConfig& c, LayerWeights& l);
LayerPredictor load_predictor(TensorSource& f, const std::string& prefix, const ModelConfig& c);
// Each layer's predictor threshold (PowerInfer's global one, or strata's per-layer key).
std::vector<float> predictor_thresholds(TensorSource& f, int64_t n_layer);
// "blk.N.attn_q.weight" -> "blk.N.attn_q" (where its .bias and .scale live).
std::string base_name(const std::string& weight_name);

}  // namespace strata
