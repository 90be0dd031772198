#include "cli/chat_commands.h"

#include <fmt/format.h>

namespace strata {

namespace {

// The line's first word ("/save" of "/save a.json") and the rest, trimmed.
std::pair<std::string, std::string> split_command(const std::string& line) {
  const size_t space = line.find_first_of(" \t");
  if (space == std::string::npos) return {line, ""};
  const size_t rest = line.find_first_not_of(" \t", space);
  std::string arg = rest == std::string::npos ? "" : line.substr(rest);
  while (!arg.empty() && (arg.back() == ' ' || arg.back() == '\t')) arg.pop_back();
  return {line.substr(0, space), arg};
}

}  // namespace

std::string chat_commands_help() {
  return "/reset: a new conversation; /save FILE: write it as JSON messages; /quit (or Ctrl-D); "
         "/help; // at the start sends a line beginning with /; Ctrl-C stops a reply";
}

ChatLine parse_chat_line(const std::string& line) {
  if (line.rfind("//", 0) == 0) return {ChatLineKind::Message, line.substr(1)};
  if (line.empty() || line[0] != '/') return {ChatLineKind::Message, line};
  const auto [name, arg] = split_command(line);
  const bool bare = arg.empty();
  if ((name == "/quit" || name == "/exit") && bare) return {ChatLineKind::Quit, ""};
  if ((name == "/help" || name == "/?") && bare) return {ChatLineKind::Help, ""};
  if ((name == "/reset" || name == "/clear") && bare) return {ChatLineKind::Reset, ""};
  if (name == "/save")
    return bare ? ChatLine{ChatLineKind::Refused, "/save needs a file: /save FILE"}
                : ChatLine{ChatLineKind::Save, arg};
  if (name == "/quit" || name == "/exit" || name == "/help" || name == "/?" || name == "/reset" ||
      name == "/clear")
    return {ChatLineKind::Refused, fmt::format("{} takes no argument", name)};
  return {ChatLineKind::Refused,
          fmt::format("unknown command {} ({})", name.substr(0, 40), chat_commands_help())};
}

}  // namespace strata
