// A reasoning model's thoughts apart from its answer (chat/reasoning.h), as llama-server splits
// them into reasoning_content and content: the whole reply's split, and the streaming splitter's
// deltas adding up to it however the reply is cut into pieces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/reasoning.h"

namespace strata {
namespace {

struct Case {
  std::string reply;
  bool open;
  std::string reasoning, content;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"<think>\nLet me see.\n</think>\n\nThe answer is 4.", false, "Let me see.",
       "The answer is 4."},
      {"\n<think>a  b</think>c", false, "a  b", "c"},
      {"Just an answer.\n", false, "", "Just an answer.\n"},
      {"\n\nNo tag <think> inside", false, "", "\n\nNo tag <think> inside"},
      {"<think>\n\n</think>\n\nEmpty thoughts.", false, "", "Empty thoughts."},
      {"<think>still thinking when it stopped  ", false, "still thinking when it stopped", ""},
      {"<think>a < b and c </th", false, "a < b and c </th", ""},
      // DeepSeek-R1's prompt opened the thoughts: no <think> in the reply.
      {"Hmm.\nSo 2+2.\n</think>\n\n4", true, "Hmm.\nSo 2+2.", "4"},
      {"  only thoughts", true, "only thoughts", ""},
      {"<thi", false, "", "<thi"},
      {"", false, "", ""},
      {"<think></think>", false, "", ""},
      {"<think>x</think></think>y", false, "x", "</think>y"},
  };
  return all;
}

TEST(Reasoning, TheWholeReplySplitsAtTheThinkTags) {
  for (const Case& c : cases()) {
    const ReasoningReply r = split_reasoning(c.reply, c.open);
    EXPECT_EQ(r.reasoning, c.reasoning) << c.reply;
    EXPECT_EQ(r.content, c.content) << c.reply;
  }
}

ReasoningReply streamed(const Case& c, const std::vector<size_t>& cuts) {
  ReasoningStream s(c.open);
  ReasoningReply all;
  size_t from = 0;
  for (size_t cut : cuts) {
    const ReasoningReply d = s.feed(std::string_view(c.reply).substr(from, cut - from));
    all.reasoning += d.reasoning, all.content += d.content;
    from = cut;
  }
  const ReasoningReply d = s.feed(std::string_view(c.reply).substr(from));
  all.reasoning += d.reasoning, all.content += d.content;
  const ReasoningReply last = s.finish();
  all.reasoning += last.reasoning, all.content += last.content;
  return all;
}

TEST(Reasoning, StreamedPiecesAddUpToTheWholeSplitWhereverTheyAreCut) {
  for (const Case& c : cases()) {
    const size_t n = c.reply.size();
    for (size_t i = 0; i <= n; ++i)
      for (size_t j = i; j <= n; ++j) {
        const ReasoningReply r = streamed(c, {i, j});
        ASSERT_EQ(r.reasoning, c.reasoning) << c.reply << " cut at " << i << ", " << j;
        ASSERT_EQ(r.content, c.content) << c.reply << " cut at " << i << ", " << j;
      }
    std::vector<size_t> bytes;  // one byte a piece
    for (size_t i = 1; i < n; ++i) bytes.push_back(i);
    const ReasoningReply r = streamed(c, bytes);
    EXPECT_EQ(r.reasoning, c.reasoning) << c.reply;
    EXPECT_EQ(r.content, c.content) << c.reply;
  }
}

TEST(Reasoning, ThoughtsAreReleasedAsTheyComeNotAtTheEnd) {
  ReasoningStream s(false);
  EXPECT_EQ(s.feed("<think>").reasoning, "");
  EXPECT_EQ(s.feed("First, ").reasoning, "First,");  // the space waits for what follows
  EXPECT_EQ(s.feed("add.</").reasoning, " add.");    // "</" may begin </think>
  const ReasoningReply closing = s.feed("think>\n\nFour");
  EXPECT_EQ(closing.reasoning, "");
  EXPECT_EQ(closing.content, "Four");
  EXPECT_EQ(s.feed(".").content, ".");
}

TEST(Reasoning, FormatsTemplatesAndOpenPrompts) {
  EXPECT_EQ(reasoning_format_from_name("none"), ReasoningFormat::None);
  EXPECT_EQ(reasoning_format_from_name("auto"), ReasoningFormat::Auto);
  EXPECT_EQ(reasoning_format_from_name("deepseek"), ReasoningFormat::DeepSeek);
  EXPECT_FALSE(reasoning_format_from_name("deepseek-legacy"));
  EXPECT_STREQ(reasoning_format_name(ReasoningFormat::DeepSeek), "deepseek");
  EXPECT_TRUE(template_thinks("{{ '<think>' }}...{{ '</think>' }}"));
  EXPECT_FALSE(template_thinks("{{ messages[0].content }}"));
  EXPECT_TRUE(prompt_opens_thinking("<|Assistant|><think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace strata
