// A conversation longer than its context (chat/context_fit.h): the policy with a counted
// template, and the server leaving out the oldest turns and saying so.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/context_fit.h"
#include "server_fixture.h"

namespace strata {
namespace {

// Each message costs its content's length plus 2 (a counted template).
size_t counted(const std::vector<ChatMessage>& ms) {
  size_t n = 0;
  for (const auto& m : ms) n += m.content.size() + 2;
  return n;
}

std::vector<ChatMessage> conversation(int turns) {
  std::vector<ChatMessage> ms = {{"system", "sys"}};
  for (int t = 0; t < turns; ++t) {
    ms.emplace_back("user", "question" + std::to_string(t));
    ms.emplace_back("assistant", "answer" + std::to_string(t));
  }
  ms.emplace_back("user", "last");
  return ms;
}

TEST(ContextFit, AConversationThatFitsIsKeptWhole) {
  const auto ms = conversation(3);
  const ChatFit fit = fit_chat(ms, counted(ms), counted);
  EXPECT_EQ(fit.dropped, 0u);
  EXPECT_EQ(fit.messages.size(), ms.size());
}

TEST(ContextFit, TheOldestTurnsGoTheSystemPromptAndTheLastTurnStay) {
  const auto ms = conversation(6);  // 1 system, 12 turn messages, the last question
  for (size_t limit : {counted(ms) - 1, counted(ms) / 2, size_t{20}}) {
    const ChatFit fit = fit_chat(ms, limit, counted);
    ASSERT_GT(fit.dropped, 0u) << limit;
    EXPECT_LE(counted(fit.messages), limit);
    EXPECT_EQ(fit.messages.front().role, "system");
    EXPECT_EQ(fit.messages.back().content, "last");
    EXPECT_EQ(fit.messages[1].role, "user") << "the kept turns start with a question";
    EXPECT_EQ(fit.messages.size() + fit.dropped, ms.size());
    // The fewest dropped: one more kept turn (a question and its answer) would not fit.
    if (fit.dropped >= 2) {
      const size_t start = ms.size() - (fit.messages.size() - 1);  // the first kept turn
      std::vector<ChatMessage> more = {ms[0]};
      more.insert(more.end(), ms.begin() + static_cast<std::ptrdiff_t>(start - 2), ms.end());
      EXPECT_GT(counted(more), limit) << limit;
    }
  }
}

TEST(ContextFit, ALastTurnTooLongAloneComesBackForTheCallerToRefuse) {
  auto ms = conversation(2);
  ms.back().content = std::string(100, 'x');
  const ChatFit fit = fit_chat(ms, 50, counted);
  EXPECT_EQ(fit.messages.size(), 2u);  // the system prompt and the last turn
  EXPECT_EQ(fit.dropped, 4u);
  EXPECT_GT(counted(fit.messages), 50u);
  // A single question: nothing to drop.
  const std::vector<ChatMessage> one = {{"user", std::string(100, 'x')}};
  EXPECT_EQ(fit_chat(one, 50, counted).dropped, 0u);
}

TEST(ContextFit, TheReplyKeepsItsTokensOrAQuarterOfTheContext) {
  EXPECT_EQ(reply_reserve(256, 16), 16);
  EXPECT_EQ(reply_reserve(256, 256), 64);
  EXPECT_EQ(reply_reserve(256, -1), 64);
  EXPECT_EQ(reply_reserve(4096, 0), 1024);
}

using strata::testing::ServerHttp;

TEST_F(ServerHttp, AChatLongerThanTheContextLosesItsOldestTurnsAndSaysSo) {
  slot_context_ = 256;
  restart({});
  nlohmann::json messages = nlohmann::json::array({{{"role", "system"}, {"content", "Be brief."}}});
  for (int t = 0; t < 12; ++t) {
    messages.push_back({{"role", "user"}, {"content", "And God said, let there be light " + std::to_string(t)}});
    messages.push_back({{"role", "assistant"}, {"content", "and there was light and it was good"}});
  }
  messages.push_back({{"role", "user"}, {"content", "What then?"}});
  const nlohmann::json body = {{"messages", messages}, {"max_tokens", 8}};
  const auto r = post("/v1/chat/completions", body.dump(), 200);
  ASSERT_TRUE(r.contains("dropped_messages")) << r.dump();
  const int64_t dropped = r["dropped_messages"].get<int64_t>();
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(dropped % 2, 0) << "whole turns";
  EXPECT_LE(r["usage"]["prompt_tokens"].get<int64_t>() + 8, 256);
  // A short chat keeps everything and says nothing.
  const auto short_chat = post("/v1/chat/completions",
                               R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})", 200);
  EXPECT_FALSE(short_chat.contains("dropped_messages"));
}

}  // namespace
}  // namespace strata
