// Reliability round 3 (issue 52) through HTTP: requests that killed or stalled `strata serve`
// for every user are now their own 400, naming the field, and the server answers the next one.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace strata {
namespace {

using strata::testing::ServerHttp;
using Json = nlohmann::json;

class HostileRequests : public ServerHttp {
 protected:
  void SetUp() override {
    start([](ServerOptions& o) { o.max_body_bytes = size_t{2} << 20; });
  }
  // The server still answers an ordinary request.
  void still_serving() {
    const Json r = post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 2})", 200);
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  }
};

// Issue 52.1: an assistant message's tool_calls arguments (a JSON string) were parsed again
// without the body's nesting limit: 30,000 '[' killed the server (SIGSEGV).
TEST_F(HostileRequests, DeepToolCallArgumentsAre400NamingThem) {
  const Json body = {
      {"messages",
       {{{"role", "user"}, {"content", "hi"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "c1"},
            {"type", "function"},
            {"function", {{"name", "f"}, {"arguments", std::string(30000, '[')}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "ok"}}}},
      {"max_tokens", 2}};
  const Json e = post("/v1/chat/completions", body.dump(), 400);
  EXPECT_EQ(e["error"]["param"], "messages[1].tool_calls[0].function.arguments") << e;
  still_serving();
}

// Issue 52.2/52.3: a grammar nested 30,000 deep, a chain of 60,000 rules looping back, a
// schema $ref chain of 20,000: SIGSEGV, or an abort inside the scheduler. Now 400s.
TEST_F(HostileRequests, HostileGrammarsAndSchemasAre400NamingTheField) {
  const std::string nested = "root ::= " + std::string(30000, '(') + "\"a\"" + std::string(30000, ')');
  Json e = post("/v1/completions", Json{{"prompt", "a"}, {"grammar", nested}}.dump(), 400);
  EXPECT_EQ(e["error"]["param"], "grammar");
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 60000; ++i) chain += fmt::format("r{} ::= r{}\n", i, i + 1);
  chain += "r60000 ::= r0 \"a\"\n";
  e = post("/v1/completions", Json{{"prompt", "a"}, {"grammar", chain}}.dump(), 400);
  EXPECT_EQ(e["error"]["param"], "grammar");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("left-recursive"), std::string::npos) << e;
  Json defs = Json::object();
  for (int i = 0; i < 20000; ++i) defs[fmt::format("d{}", i)] = {{"$ref", fmt::format("#/$defs/d{}", i + 1)}};
  defs["d20000"] = {{"type", "integer"}};
  const Json schema = {{"$defs", defs}, {"$ref", "#/$defs/d0"}};
  e = post("/v1/chat/completions",
           Json{{"messages", {{{"role", "user"}, {"content", "n?"}}}},
                {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}}
               .dump(),
           400);
  EXPECT_EQ(e["error"]["param"], "response_format");
  still_serving();
}

// Issue 52.7: a grammar failing mid-reply is that request's 400 (it names the grammar), and a
// request running beside it is answered as usual.
TEST_F(HostileRequests, AGrammarFailingMidReplyIsItsOwn400) {
  std::string gbnf = "root ::= [a-zA-Z ] a0\n";
  for (int i = 0; i < 20; ++i) gbnf += fmt::format("a{} ::= a{} | a{}\n", i, i + 1, i + 1);
  gbnf += "a20 ::= \"x\"\n";
  const Json e = post("/v1/completions", Json{{"prompt", "In"}, {"grammar", gbnf}, {"max_tokens", 4}}.dump(), 400);
  EXPECT_EQ(e["error"]["param"], "grammar");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("more than 4096 paths"), std::string::npos) << e;
  still_serving();
}

// Issue 52.10: /tokenize with pieces built a document of a million objects outside the request
// budget (7 MB took 2.6 GB, 2.2 GB stayed held). Its answer is bounded and reserved first.
TEST_F(HostileRequests, TokenizeAnswersAreCountedInTheRequestMemory) {
  restart([](ServerOptions& o) {
    o.max_body_bytes = size_t{512} << 10;
    o.request_memory_bytes = uint64_t{2} << 20;
  });
  std::string text;
  while (text.size() < 400000) text += "a b c d ";
  Json e = post("/tokenize", Json{{"content", text}, {"with_pieces", true}}.dump(), 413);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("the answer would take"), std::string::npos) << e;
  // Small answers are as before, ids alone or with pieces.
  const Json r = post("/tokenize", Json{{"content", "a b"}, {"with_pieces", true}}.dump(), 200);
  ASSERT_TRUE(r["tokens"].is_array());
  ASSERT_FALSE(r["tokens"].empty());
  EXPECT_TRUE(r["tokens"][0]["id"].is_number_integer());
  std::string joined;
  for (const Json& t : r["tokens"]) joined += t["piece"].get<std::string>();
  EXPECT_EQ(joined.find("a"), joined.find_first_not_of(" "));
  const Json ids = post("/tokenize", Json{{"content", "a b"}}.dump(), 200);
  EXPECT_EQ(ids["tokens"].size(), r["tokens"].size());
  const Json back = post("/detokenize", Json{{"tokens", ids["tokens"]}}.dump(), 200);
  EXPECT_NE(back["content"].get<std::string>().find("a b"), std::string::npos) << back;
  still_serving();
}

// Issue 52.9: a grammar's memory was counted nowhere (a 30 KB literal {1000} took 1.86 GB
// before the element limit). It is held in the request memory for the life of the generation.
TEST_F(HostileRequests, AGrammarIsCountedInTheRequestMemory) {
  restart([](ServerOptions& o) {
    o.max_body_bytes = size_t{512} << 10;
    o.request_memory_bytes = uint64_t{2} << 20;
  });
  const std::string big = "root ::= \"" + std::string(100000, 'a') + "\"";
  const Json e = post("/v1/completions", Json{{"prompt", "a"}, {"grammar", big}}.dump(), 413);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("its grammar would take"), std::string::npos) << e;
  post("/v1/completions", Json{{"prompt", "a"}, {"grammar", "root ::= [a-z]+"}, {"max_tokens", 2}}.dump(), 200);
}

// Issue 52.19: duplicate ids in logit_bias's array form were summed past +-100; keys " 5" and
// "+5" were taken as 5. Now keys are decimal ids, and a repeated id's last bias is its bias.
TEST(LogitBias, KeysAreDecimalIdsAndARepeatedIdKeepsItsLastBias) {
  const CompletionRequest r = parse_completion_request(
      R"({"prompt": "a", "logit_bias": [[5, 100], [7, -3], [5, 100], [5, 60]]})", false, {});
  const std::vector<std::pair<int32_t, float>> expected = {{7, -3.0f}, {5, 60.0f}};
  EXPECT_EQ(r.generation.sampling.logit_bias, expected);
}

TEST_F(HostileRequests, LogitBiasKeysAreIdsAndEachIdComesOnce) {
  for (const char* bias : {R"({" 5": 1})", R"({"+5": 1})", R"({"5 ": 1})", R"({"0x5": 1})"}) {
    const Json e = post("/v1/completions",
                        std::string(R"({"prompt": "a", "max_tokens": 1, "logit_bias": )") + bias + "}", 400);
    EXPECT_EQ(e["error"]["param"], "logit_bias") << bias;
  }
  post("/v1/completions", R"({"prompt": "a", "max_tokens": 1, "logit_bias": {"5": 100, "6": -100}})", 200);
  post("/v1/completions", R"({"prompt": "a", "max_tokens": 1, "logit_bias": [[5, 100], [6, false]]})", 200);
}

}  // namespace
}  // namespace strata
