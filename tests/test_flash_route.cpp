// The route to the flash tier a "too big" message names (model/flash_route.h): one that works
// for the model's FFN kind, never a step that refuses it.
#include <gtest/gtest.h>

#include "model/flash_route.h"

namespace strata {
namespace {

bool says(const std::string& text, const char* what) {
  return text.find(what) != std::string::npos;
}

TEST(FlashRoute, EachFfnKindGetsTheCommandsThatWorkForIt) {
  ModelConfig c;
  c.ffn = FfnActivation::ReGLU;
  EXPECT_TRUE(says(flash_route(c, false), "strata train-predictors"));
  EXPECT_TRUE(says(flash_route(c, false), "strata bundle -m P.gguf"));
  EXPECT_TRUE(says(flash_route(c, true), "strata bundle -m FILE"));
  EXPECT_FALSE(says(flash_route(c, true), "train-predictors"));
  c.ffn = FfnActivation::SwiGLU;  // predictors would refuse it: TEAL thresholds and columns
  EXPECT_TRUE(says(flash_route(c, false), "strata sparsify"));
  EXPECT_TRUE(says(flash_route(c, false), "bundle --columns"));
  EXPECT_FALSE(says(flash_route(c, false), "train-predictors"));
  c.n_expert = 8;
  EXPECT_TRUE(says(flash_route(c, false), "no flash route yet"));
  c.ffn = FfnActivation::ReGLU;  // ReLU experts bundle by neuron
  EXPECT_TRUE(says(flash_route(c, false), "strata train-predictors"));
}

}  // namespace
}  // namespace strata
