// A reasoning model's <think> thoughts as llama-server returns them (chat/reasoning.h wired in
// server/openai_replies.cpp and completion_stream.cpp): reasoning_content apart from content,
// whole and streamed, with the thoughts opened by the template's prompt (DeepSeek-R1's), kept in
// content by reasoning_format none (the request's or the server's), a bad format refused. The
// shipped model is made to write the reply by a grammar.
#include <gtest/gtest.h>

#include "server_fixture.h"
#include "test_helpers.h"

namespace strata::testing {
namespace {

class ReasoningServer : public ServerHttp {
 protected:
  void SetUp() override {
    slot_context_ = 256;
    start([](ServerOptions& o) { o.chat_template = data_file("chat_templates/Qwen-Qwen3.jinja"); });
  }
  // A chat request whose reply is exactly `reply` (a grammar of one string), with more fields.
  static std::string request(const std::string& reply, const std::string& more = "") {
    nlohmann::json r = {{"messages", {{{"role", "user"}, {"content", "What is two and two?"}}}},
                        {"max_tokens", 96},
                        {"grammar", "root ::= " + nlohmann::json(reply).dump()}};
    if (!more.empty()) r.update(nlohmann::json::parse(more));
    return r.dump();
  }
  // A stream's reasoning_content and content deltas, each joined.
  std::pair<std::string, std::string> streamed(const std::string& body) {
    const auto res = client_->Post("/v1/chat/completions", body, "application/json");
    EXPECT_TRUE(res);
    std::string reasoning, content;
    if (!res) return {};
    size_t pos = 0;
    while ((pos = res->body.find("data: ", pos)) != std::string::npos) {
      const size_t end = res->body.find("\n\n", pos);
      const std::string data = res->body.substr(pos + 6, end - pos - 6);
      pos = end;
      if (data == "[DONE]") break;
      const auto delta = nlohmann::json::parse(data)["choices"][0]["delta"];
      if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
      if (delta.contains("content") && delta["content"].is_string()) content += delta["content"];
    }
    return {reasoning, content};
  }
};

const std::string kReply = "<think>\nTwo and two.\n</think>\n\nFour.";

TEST_F(ReasoningServer, ThoughtsComeAsReasoningContentWholeAndStreamed) {
  const auto whole = post("/v1/chat/completions", request(kReply), 200);
  const auto& message = whole["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "Two and two.");
  EXPECT_EQ(message["content"], "Four.");
  const auto [reasoning, content] = streamed(request(kReply, R"({"stream": true})"));
  EXPECT_EQ(reasoning, "Two and two.");
  EXPECT_EQ(content, "Four.");
  // A reply without thoughts is all content, as it is.
  const auto plain = post("/v1/chat/completions", request("Four."), 200);
  EXPECT_EQ(plain["choices"][0]["message"]["content"], "Four.");
  EXPECT_FALSE(plain["choices"][0]["message"].contains("reasoning_content"));
}

TEST_F(ReasoningServer, FormatNoneKeepsTheThoughtsInContentAndBadFormatsAreRefused) {
  const auto kept =
      post("/v1/chat/completions", request(kReply, R"({"reasoning_format": "none"})"), 200);
  EXPECT_EQ(kept["choices"][0]["message"]["content"], kReply);
  EXPECT_FALSE(kept["choices"][0]["message"].contains("reasoning_content"));
  const auto [reasoning, content] =
      streamed(request(kReply, R"({"stream": true, "reasoning_format": "none"})"));
  EXPECT_EQ(reasoning, "");
  EXPECT_EQ(content, kReply);
  const auto bad = post("/v1/chat/completions",
                        request(kReply, R"({"reasoning_format": "deepseek-legacy"})"), 400);
  EXPECT_EQ(bad["error"]["param"], "reasoning_format");
  // The server's default: --reasoning-format none.
  restart([](ServerOptions& o) {
    o.chat_template = data_file("chat_templates/Qwen-Qwen3.jinja");
    o.defaults.reasoning_format = ReasoningFormat::None;
  });
  EXPECT_EQ(post("/v1/chat/completions", request(kReply), 200)["choices"][0]["message"]["content"],
            kReply);
  EXPECT_EQ(post("/v1/chat/completions", request(kReply, R"({"reasoning_format": "deepseek"})"),
                 200)["choices"][0]["message"]["content"],
            "Four.");
}

// DeepSeek-R1's template opens the thoughts in the prompt: the reply has only </think>.
TEST_F(ReasoningServer, ThoughtsOpenedByThePromptEndAtTheClosingTag) {
  restart([](ServerOptions& o) {
    o.chat_template = data_file("chat_templates/llama-cpp-deepseek-r1.jinja");
  });
  const std::string reply = "Two and two.\n</think>\n\nFour.";
  const auto whole = post("/v1/chat/completions", request(reply), 200);
  EXPECT_EQ(whole["choices"][0]["message"]["reasoning_content"], "Two and two.");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "Four.");
  const auto [reasoning, content] = streamed(request(reply, R"({"stream": true})"));
  EXPECT_EQ(reasoning, "Two and two.");
  EXPECT_EQ(content, "Four.");
}

}  // namespace
}  // namespace strata::testing
