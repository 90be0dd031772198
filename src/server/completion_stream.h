// A completion streamed as server-sent events, OpenAI's chunks: a chat's first delta with the
// role, each piece of text as it is released (with its logprobs where asked), with tools the
// whole reply at the end (it may be a call, not text), the finish chunks (usage on the last
// where asked) and [DONE]. A client that half-closes is probed with an SSE comment so that a
// request still waiting for a slot is dropped at once; a stream cut by the server's stop ends
// with an error event saying why.
#pragma once

#include <httplib.h>

#include <functional>

#include "generation/batch_scheduler.h"
#include "server/openai_api.h"

namespace strata {

struct StreamContext {
  TokenText token_text;               // a token's text in logprobs
  std::function<bool()> abandoned;    // the client is gone or the server stops
  std::function<bool()> stopping;     // the server stops (an abandoned stream says so)
  std::function<bool()> half_closed;  // the client sent its FIN
};

// Sends the job's text until it ends; false when the client is gone (or the stream was cut).
bool stream_completion(const CompletionRequest& req, JobHandle& job, const CompletionIds& cid,
                       httplib::DataSink& sink, const StreamContext& context);

}  // namespace strata
