// Chat messages to a prompt. GGUF files carry a Jinja template (tokenizer.chat_template); strata
// recognizes the common formats by their markers rather than running Jinja: ChatML
// (<|im_start|>), Llama 2 ([INST]), Llama 3 (<|start_header_id|>), Zephyr (<|user|>). A model
// without a template (or an unrecognized one) gets a plain transcript, "User: ...\nAssistant:",
// whose next "\nUser:" is a stop string.
#pragma once

#include <string>
#include <vector>

namespace strata {

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

struct ChatPrompt {
  std::string text;               // ends where the assistant's reply starts
  std::vector<std::string> stop;  // stop strings the format implies
  std::string format;             // chatml, llama2, llama3, zephyr or plain
};

ChatPrompt render_chat(const std::vector<ChatMessage>& messages, const std::string& template_text,
                       const std::string& bos, const std::string& eos);

}  // namespace strata
