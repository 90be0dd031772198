// The Jinja engine on arbitrary templates: each parses and renders (on a fixed conversation) or
// fails with jinja::Error; nothing else may escape, and the engine's bounds (its render budget,
// value depth, chains counted as nesting: issue 52) keep every input fast (no hang, no
// unbounded memory). After a NUL byte, the input is the last user message's content: hostile
// values as well as hostile templates.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // templates are short; longer inputs only slow the search
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source = input.substr(0, nul);
  const std::string content = nul == std::string::npos ? "Hello, user" : input.substr(nul + 1);
  using namespace strata::jinja;
  try {
    const Template t(source);
    List messages;
    for (const char* role : {"system", "user", "assistant", "user"}) {
      Dict m;
      m.set("role", Value(role));
      m.set("content", Value(role == std::string("user") ? content : std::string("Hello, ") + role));
      messages.emplace_back(std::move(m));
    }
    Dict context;
    context.set("messages", Value(std::move(messages)));
    context.set("add_generation_prompt", Value(true));
    context.set("bos_token", Value("<s>"));
    context.set("eos_token", Value("</s>"));
    // A smaller budget than the engine's 2M steps: the bounds are the same code, and a search
    // that spends seconds per input on budget-exhausting loops under ASan finds little.
    strata::jinja::RenderLimits limits;
    limits.max_steps = 100000;
    limits.max_bytes = uint64_t{16} << 20;
    (void)t.render(context, limits);
  } catch (const Error&) {  // RaisedException included
  }
  return 0;
}
