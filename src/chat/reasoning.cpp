#include "chat/reasoning.h"

#include <algorithm>

namespace strata {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}
std::string_view strip_left(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}
std::string_view strip_right(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}
// The length of the longest end of s that begins `tag` (a tag still arriving), shorter than it.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
  if (name == "none") return ReasoningFormat::None;
  if (name == "auto") return ReasoningFormat::Auto;
  if (name == "deepseek") return ReasoningFormat::DeepSeek;
  return std::nullopt;
}

const char* reasoning_format_name(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::None:
      return "none";
    case ReasoningFormat::DeepSeek:
      return "deepseek";
    case ReasoningFormat::Auto:
      break;
  }
  return "auto";
}

bool template_thinks(std::string_view template_source) {
  return template_source.find(kClose) != std::string_view::npos;
}

bool prompt_opens_thinking(std::string_view prompt) {
  const std::string_view end = strip_right(prompt);
  return end.size() >= kOpen.size() && end.substr(end.size() - kOpen.size()) == kOpen;
}

ReasoningReply split_reasoning(std::string_view reply, bool open) {
  std::string_view rest = reply;
  if (!open) {
    const std::string_view start = strip_left(reply);
    if (start.substr(0, kOpen.size()) != kOpen) return {"", std::string(reply)};
    rest = start.substr(kOpen.size());
  }
  const size_t end = rest.find(kClose);
  if (end == std::string_view::npos) return {std::string(strip_left(strip_right(rest))), ""};
  return {std::string(strip_left(strip_right(rest.substr(0, end)))),
          std::string(strip_left(rest.substr(end + kClose.size())))};
}

void ReasoningStream::feed_thinking(ReasoningReply& out) {
  const size_t close = pending_.find(kClose);
  std::string_view body = pending_;
  size_t keep_from = pending_.size();
  if (close != std::string::npos) {
    body = body.substr(0, close);
  } else {  // hold a tag still arriving and the whitespace before it
    body = body.substr(0, body.size() - partial_tag(body, kClose));
    body = strip_right(body);
    keep_from = body.size();
  }
  if (!thought_started_) body = strip_left(body);
  if (close != std::string::npos) body = strip_right(body);
  out.reasoning += body;
  thought_started_ |= !body.empty();
  if (close != std::string::npos) {
    pending_.erase(0, close + kClose.size());
    state_ = State::AnswerStart;
  } else {
    pending_.erase(0, keep_from);
  }
}

ReasoningReply ReasoningStream::feed(std::string_view piece) {
  ReasoningReply out;
  pending_ += piece;
  if (state_ == State::Start) {
    const std::string_view start = strip_left(pending_);
    if (start.size() >= kOpen.size() && start.substr(0, kOpen.size()) == kOpen) {
      pending_ = std::string(start.substr(kOpen.size()));
      state_ = State::Thinking;
    } else if (start.size() < kOpen.size() && kOpen.substr(0, start.size()) == start) {
      return out;  // whitespace, or the tag arriving
    } else {
      state_ = State::Answer;  // no thoughts: the reply as it is
    }
  }
  if (state_ == State::Thinking) feed_thinking(out);
  if (state_ == State::AnswerStart) {
    const std::string_view answer = strip_left(pending_);
    if (answer.empty()) {
      pending_.clear();
      return out;
    }
    pending_ = std::string(answer);
    state_ = State::Answer;
  }
  if (state_ == State::Answer) {
    out.content += pending_;
    pending_.clear();
  }
  return out;
}

ReasoningReply ReasoningStream::finish() {
  ReasoningReply out;
  switch (state_) {
    case State::Start:  // whitespace or part of the tag: the reply as it is
      out.content = pending_;
      break;
    case State::Thinking: {  // never closed: the held part is thought, trimmed at the end
      std::string_view held = strip_right(pending_);
      if (!thought_started_) held = strip_left(held);
      out.reasoning = held;
      break;
    }
    case State::AnswerStart:
    case State::Answer:
      break;
  }
  pending_.clear();
  return out;
}

}  // namespace strata
