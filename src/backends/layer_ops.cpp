#include "backends/backend.h"

namespace strata {

const char* layer_op_name(LayerOp op) {
  switch (op) {
    case LayerOp::AttentionSoftCap:
      return "attention soft cap";
    case LayerOp::AttentionSinks:
      return "attention sinks";
    case LayerOp::Count:
      break;
  }
  return "?";
}

}  // namespace strata
