// A Jinja template engine for chat templates (GGUF's tokenizer.chat_template), rendering as
// Hugging Face's apply_chat_template does with Jinja2: trim_blocks, lstrip_blocks, loop
// controls, its tojson, raise_exception and strftime_now. The subset is what chat templates use
// (see jinja_parser.h and jinja_builtins.h); what it lacks is an Error at parse or render time
// naming the construct, never silent output. Rendering is bounded: output, loop steps and macro
// depth have limits, so a hostile template fails cleanly instead of hanging.
#pragma once

#include <memory>
#include <string>

#include "chat/jinja_ast.h"
#include "chat/jinja_budget.h"
#include "chat/jinja_value.h"

namespace strata::jinja {

class Template {
 public:
  // Parses `source`; jinja::Error (with the line) if it is not a template this engine runs.
  explicit Template(const std::string& source);

  // The text for `context` (the template's variables; the globals are added). Throws
  // RaisedException for the template's own raise_exception, Error for anything else.
  std::string render(const Dict& context, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace strata::jinja
