// A request's prompt as tokens: a chat's messages through the chat template (its oldest turns
// left out when the whole conversation leaves the reply no room: chat/context_fit.h; with its tools,
// their call style and, for a required call, the grammar that makes the reply one call), a
// completion's text or token ids; every token checked against the vocabulary and the whole
// against the slots' context, a text too long for it refused before it is tokenized. Failures
// are ApiErrors (400) naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "model/model.h"
#include "server/openai_api.h"

namespace strata {

class PromptBuilder {
 public:
  // `n_ctx`: the positions of one slot.
  PromptBuilder(const Model& model, const ChatTemplate& chat_template, int64_t n_ctx)
      : model_(model), template_(chat_template), n_ctx_(n_ctx) {}

  // The request's prompt; a chat's template stop strings and a tool call's grammar are added
  // to its generation options.
  // `limits`: the memory a chat template's render may borrow (the request's reservation).
  std::vector<int32_t> prompt_tokens(CompletionRequest& req, const jinja::RenderLimits& limits = {}) const;
  // An embedding input's tokens (`i`: its index, for messages).
  std::vector<int32_t> input_tokens(const std::string& text, size_t i) const;
  // Refuses token ids of `what` outside the context (the input of an embedding, by index).
  void check_context(size_t tokens, const std::string& what, const char* param) const;

 private:
  void prepare_tools(CompletionRequest& req) const;
  std::vector<int32_t> chat_tokens(CompletionRequest& req, const jinja::RenderLimits& limits) const;
  ChatPrompt render(const CompletionRequest& req, const std::vector<ChatMessage>& messages,
                    const jinja::RenderLimits& limits) const;
  std::vector<int32_t> tokens_of(const ChatPrompt& p) const;
  void check_fits_before_tokenizing(const std::string& text, const char* param,
                                    const std::string& what) const;
  void check_vocabulary(int32_t id, const char* what, const char* param) const;

  const Model& model_;
  const ChatTemplate& template_;
  int64_t n_ctx_;
};

}  // namespace strata
