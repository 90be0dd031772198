// A reasoning model's thoughts apart from its answer, as llama-server returns them: the text
// between <think> and </think> (Qwen3, QwQ, DeepSeek-R1 and its distills, GLM-4.5) becomes the
// message's reasoning_content, the rest its content. Pure functions and a streaming splitter whose
// deltas add up to the whole reply's split; the server wires them to requests
// (--reasoning-format, the request's reasoning_format).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace strata {

// llama-server's reasoning formats: none (the thoughts stay in content), auto and deepseek (both
// split them out here; strata knows the <think> convention only).
enum class ReasoningFormat { None, Auto, DeepSeek };
std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name);
const char* reasoning_format_name(ReasoningFormat format);

// Whether a chat template writes its model's reasoning between <think> and </think>.
bool template_thinks(std::string_view template_source);
// Whether a rendered prompt leaves the model inside its reasoning (DeepSeek-R1's templates end
// the generation prompt with "<think>\n"): the reply then starts with thoughts, unopened.
bool prompt_opens_thinking(std::string_view prompt);

struct ReasoningReply {
  std::string reasoning, content;
};

// The reply's thoughts and answer: with `open`, or where the reply starts (after whitespace) with
// <think>, the thoughts run to </think> (to the end where it never comes: still thinking), trimmed
// of whitespace, and the answer is what follows, its leading whitespace dropped; otherwise the
// whole reply is the answer, as it is.
ReasoningReply split_reasoning(std::string_view reply, bool open);

// The same split of a reply arriving in pieces: each feed releases what is certain, holding back
// what could still be a tag or whitespace the whole split trims; finish releases the rest. The
// released parts, joined, are split_reasoning of the joined pieces.
class ReasoningStream {
 public:
  explicit ReasoningStream(bool open) : state_(open ? State::Thinking : State::Start) {}
  ReasoningReply feed(std::string_view piece);
  ReasoningReply finish();

 private:
  enum class State { Start, Thinking, AnswerStart, Answer };
  void feed_thinking(ReasoningReply& out);
  State state_;
  std::string pending_;           // received, not yet released
  bool thought_started_ = false;  // some reasoning was released (its leading whitespace gone)
};

}  // namespace strata
