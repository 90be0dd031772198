// Which seed a generation samples with (generation/seed_choice.h), and the server drawing one per
// request as OpenAI and llama-server do.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "generation/seed_choice.h"
#include "server_fixture.h"

namespace strata {
namespace {

TEST(SeedChoice, AnAskedSeedWinsThenTheDefaultThenAFreshOne) {
  EXPECT_EQ(choose_seed(42, kRandomSeed, 7), 42u);
  EXPECT_EQ(choose_seed(42, 5, 7), 42u);
  EXPECT_EQ(choose_seed(0, 5, 7), 0u);
  EXPECT_EQ(choose_seed(std::nullopt, 5, 7), 5u);
  EXPECT_EQ(choose_seed(std::nullopt, kRandomSeed, 7), 7u);
  // llama.cpp's -1 asks for a fresh seed even where the server has a default.
  EXPECT_EQ(choose_seed(kRandomSeed, 5, 7), 7u);
  // OpenAI takes any integer: other negative seeds are seeds.
  EXPECT_EQ(choose_seed(-2, 5, 7), static_cast<uint64_t>(int64_t{-2}));
}

TEST(SeedChoice, FreshSeedsDiffer) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(fresh_seed());
  EXPECT_EQ(seen.size(), 1000u);
}

using strata::testing::ServerHttp;

class ServerSeeds : public ServerHttp {
 protected:
  // Four sampled completions (temperature 1, nothing cut) of the same prompt.
  std::set<std::string> four_texts(const std::string& extra) {
    std::set<std::string> texts;
    for (int i = 0; i < 4; ++i) {
      const nlohmann::json r =
          post("/v1/completions",
               R"({"prompt": "And God said", "max_tokens": 16, "temperature": 1, "top_k": 0,
                   "top_p": 1, "min_p": 0)" +
                   extra + "}",
               200);
      texts.insert(r["choices"][0]["text"].get<std::string>());
    }
    return texts;
  }
};

TEST_F(ServerSeeds, RequestsWithoutASeedDrawOneEachAndANamedSeedRepeats) {
  // 16 tokens sampled from the whole vocabulary: four equal texts from four fresh seeds would
  // be a fixed seed.
  EXPECT_GT(four_texts("").size(), 1u) << "four unseeded requests gave the same text";
  EXPECT_GT(four_texts(R"(, "seed": -1)").size(), 1u);
  EXPECT_EQ(four_texts(R"(, "seed": 11)").size(), 1u);
  const auto props = client_->Get("/props");
  ASSERT_TRUE(props);
  EXPECT_EQ(nlohmann::json::parse(props->body)["default_generation_settings"]["params"]["seed"], -1);
}

TEST_F(ServerSeeds, AServerSeedIsTheSeedOfRequestsThatNameNone) {
  restart([](ServerOptions& o) { o.defaults.seed = 3; });
  EXPECT_EQ(four_texts("").size(), 1u);
  EXPECT_EQ(four_texts(""), four_texts(R"(, "seed": 3)"));
  EXPECT_GT(four_texts(R"(, "seed": -1)").size(), 1u);
  const auto props = client_->Get("/props");
  ASSERT_TRUE(props);
  EXPECT_EQ(nlohmann::json::parse(props->body)["default_generation_settings"]["params"]["seed"], 3);
}

}  // namespace
}  // namespace strata
