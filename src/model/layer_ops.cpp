#include "model/layer_ops.h"

namespace strata {

std::vector<LayerOp> layer_ops(const ModelConfig& c, int64_t) {
  std::vector<LayerOp> ops;
  if (c.attention_softcap > 0.0f) ops.push_back(LayerOp::AttentionSoftCap);
  if (c.arch->has(LayerVector::AttnSinks)) ops.push_back(LayerOp::AttentionSinks);
  return ops;
}

}  // namespace strata
