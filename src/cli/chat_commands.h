// What a line typed into `strata chat` is: a message for the model or one of the chat's
// commands. A line starting with "/" is a command, never sent to the model by mistake: an
// unknown one is refused with the list; "//" sends a message that starts with "/".
#pragma once

#include <string>

namespace strata {

enum class ChatLineKind { Message, Quit, Help, Reset, Save, Refused };

struct ChatLine {
  ChatLineKind kind = ChatLineKind::Message;
  std::string text;  // Message: what to send; Save: the file; Refused: why
};

ChatLine parse_chat_line(const std::string& line);

// One line listing the commands.
std::string chat_commands_help();

}  // namespace strata
