// The activation profile: counts match the session's own zero counting, the sidecar round-trips
// and refuses another model, the hot-neuron summary is right on a known distribution.
#include <gtest/gtest.h>

#include <numeric>
#include <span>

#include "core/error.h"
#include "offline/profile.h"
#include "runtime/session.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::temp_file;
using strata::testing::tiny_model;

TEST(Profile, CountsMatchTheSessionAndRoundTrip) {
  const auto m = Model::load(tiny_model(DType::F32, FfnActivation::ReGLU), false);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back((i * 31 + 7) % 256);
  ThreadPool pool(2);
  const NeuronProfile p = profile_model(*m, tokens, 40, 0, pool);
  EXPECT_EQ(p.tokens, 100u);
  // The same windows through a plain session: zeros per layer.
  Session s(*m, 40, pool);
  for (size_t start = 0; start < tokens.size(); start += 40) {
    s.reset();
    s.eval(std::span<const int32_t>(tokens).subspan(start,
                                                    std::min<size_t>(40, tokens.size() - start)));
  }
  for (int64_t l = 0; l < m->config.n_layer; ++l) {
    const uint64_t fired = std::accumulate(p.counts[l].begin(), p.counts[l].end(), uint64_t{0});
    EXPECT_EQ(fired, s.ffn_activations_per_layer() - s.ffn_zeros()[l]) << "layer " << l;
  }
  const std::string path = temp_file("profile.gguf");
  write_profile(p, path);
  const NeuronProfile back = read_profile(path, model_hash(*m));
  EXPECT_EQ(back.counts, p.counts);
  EXPECT_EQ(back.tokens, p.tokens);
  const auto other = Model::load(tiny_model(DType::F16, FfnActivation::ReGLU), false);
  EXPECT_THROW(read_profile(path, model_hash(*other)), Error);
  EXPECT_THROW(read_profile(tiny_model(DType::F32, FfnActivation::ReGLU)), Error);  // not a profile
  EXPECT_NE(profile_report_html(p, "tiny").find("<polyline"), std::string::npos);
}

TEST(Profile, HotNeuronSummaryOnAKnownDistribution) {
  // 10 neurons: one fires 90 times, nine fire 10 times each; 100 tokens.
  std::vector<uint32_t> counts(10, 10);
  counts[3] = 90;
  const LayerProfileSummary s = summarize_layer(counts, 100);
  EXPECT_NEAR(s.sparsity, 1.0 - 180.0 / 1000.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.neurons_for_50, 0.1);  // the hot neuron alone covers 90/180
  EXPECT_DOUBLE_EQ(s.neurons_for_80, 0.7);  // 144 needed: 90 + 5 * 10 = 140 < 144 <= 150
  EXPECT_DOUBLE_EQ(s.neurons_for_95, 1.0);  // 171 needs all: 90 + 8 * 10 = 170
  EXPECT_DOUBLE_EQ(s.curve.front(), 0.0);
  EXPECT_DOUBLE_EQ(s.curve.back(), 1.0);
}

}  // namespace
}  // namespace strata
