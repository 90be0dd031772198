// What a line typed into `strata chat` is (cli/chat_commands.h): messages go to the model,
// commands are recognised with their arguments, and an unknown "/word" is refused with the
// list instead of being sent to the model.
#include <gtest/gtest.h>

#include "cli/chat_commands.h"

namespace strata {
namespace {

TEST(ChatCommands, MessagesAndCommandsAreTold) {
  EXPECT_EQ(parse_chat_line("hello").kind, ChatLineKind::Message);
  EXPECT_EQ(parse_chat_line("hello /reset").text, "hello /reset");
  EXPECT_EQ(parse_chat_line("/quit").kind, ChatLineKind::Quit);
  EXPECT_EQ(parse_chat_line("/exit").kind, ChatLineKind::Quit);
  EXPECT_EQ(parse_chat_line("/help").kind, ChatLineKind::Help);
  EXPECT_EQ(parse_chat_line("/reset").kind, ChatLineKind::Reset);
  EXPECT_EQ(parse_chat_line("/clear").kind, ChatLineKind::Reset);
  const ChatLine save = parse_chat_line("/save  chat log.json ");
  EXPECT_EQ(save.kind, ChatLineKind::Save);
  EXPECT_EQ(save.text, "chat log.json");
}

TEST(ChatCommands, UnknownCommandsAreRefusedWithTheList) {
  const ChatLine bogus = parse_chat_line("/bogus");
  EXPECT_EQ(bogus.kind, ChatLineKind::Refused);
  EXPECT_NE(bogus.text.find("unknown command /bogus"), std::string::npos);
  EXPECT_NE(bogus.text.find("/reset"), std::string::npos);
  EXPECT_EQ(parse_chat_line("/save").kind, ChatLineKind::Refused);
  EXPECT_EQ(parse_chat_line("/reset now").kind, ChatLineKind::Refused);
}

TEST(ChatCommands, DoubleSlashSendsALineStartingWithASlash) {
  const ChatLine path = parse_chat_line("//usr/bin holds programs");
  EXPECT_EQ(path.kind, ChatLineKind::Message);
  EXPECT_EQ(path.text, "/usr/bin holds programs");
}

}  // namespace
}  // namespace strata
