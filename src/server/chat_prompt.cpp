#include "server/chat_prompt.h"

namespace strata {

namespace {

ChatPrompt chatml(const std::vector<ChatMessage>& messages) {
  ChatPrompt p{"", {"<|im_end|>"}, "chatml"};
  for (const auto& m : messages)
    p.text += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  p.text += "<|im_start|>assistant\n";
  return p;
}

ChatPrompt llama3(const std::vector<ChatMessage>& messages, const std::string& bos) {
  ChatPrompt p{bos, {"<|eot_id|>"}, "llama3"};
  for (const auto& m : messages)
    p.text += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
  p.text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return p;
}

ChatPrompt zephyr(const std::vector<ChatMessage>& messages, const std::string& eos) {
  ChatPrompt p{"", {eos}, "zephyr"};
  for (const auto& m : messages) p.text += "<|" + m.role + "|>\n" + m.content + eos + "\n";
  p.text += "<|assistant|>\n";
  return p;
}

// [INST] user [/INST] answer</s><s>[INST] ...; a system message goes inside the first [INST].
// The tokenizer adds the first BOS.
ChatPrompt llama2(const std::vector<ChatMessage>& messages, const std::string& bos,
                  const std::string& eos) {
  ChatPrompt p{"", {}, "llama2"};
  std::string system;
  bool first = true;
  for (const auto& m : messages) {
    if (m.role == "system") {
      system += "<<SYS>>\n" + m.content + "\n<</SYS>>\n\n";
    } else if (m.role == "user") {
      p.text += (first ? "" : bos) + "[INST] " + system + m.content + " [/INST]";
      system.clear();
      first = false;
    } else {
      p.text += " " + m.content + " " + eos;
    }
  }
  return p;
}

ChatPrompt plain(const std::vector<ChatMessage>& messages) {
  ChatPrompt p{"", {"\nUser:"}, "plain"};
  for (const auto& m : messages) {
    const std::string who = m.role == "system"      ? "System"
                            : m.role == "assistant" ? "Assistant"
                                                    : "User";
    p.text += who + ": " + m.content + "\n";
  }
  p.text += "Assistant:";
  return p;
}

}  // namespace

ChatPrompt render_chat(const std::vector<ChatMessage>& messages, const std::string& template_text,
                       const std::string& bos, const std::string& eos) {
  auto has = [&](const char* marker) { return template_text.find(marker) != std::string::npos; };
  if (has("<|im_start|>")) return chatml(messages);
  if (has("<|start_header_id|>")) return llama3(messages, bos);
  if (has("<|user|>")) return zephyr(messages, eos);
  if (has("[INST]")) return llama2(messages, bos, eos);
  return plain(messages);
}

}  // namespace strata
