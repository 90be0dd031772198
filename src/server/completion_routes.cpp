// Running a completion or an embeddings request on the scheduler: queued for a slot, waited for
// (cancelled when its client goes), and answered whole or streamed in its API's dialect.
#include <fmt/format.h>

#include "server/server_impl.h"

namespace strata {

using nlohmann::json;

void HttpServer::Impl::complete(const httplib::Request& http_req, std::shared_ptr<CompletionRequest> req,
                              std::shared_ptr<const ReplyDialect> dialect, httplib::Response& res,
                              std::shared_ptr<InFlight> in_flight_guard, RequestMemory::Reservation& memory) {
  const bool chat = req->chat;
  std::vector<int32_t> ids = engine->prompts.prompt_tokens(*req, intake.lend_to_render(memory));
  // The grammar (a request's, or its tools') lives as long as the generation: counted in the
  // request memory until then (a stream's outlives this handler, so the reservation is shared).
  auto grammar_memory = std::make_shared<RequestMemory::Reservation>(request_memory);
  if (req->generation.grammar)
    intake.reserve(req->generation.grammar->memory_bytes(), "its grammar", *grammar_memory);
  const CompletionIds cid{fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id++),
                          std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count(),
                          options.model_name};
  if (abandoned()) return reply_cancelled(res, *dialect);
  auto job = submit(*req, std::move(ids));
  if (!dialect->streamed(*req)) {
    std::vector<JobHandle::Piece> pieces;
    wait_for(*job, pieces);
    const auto& results = job->results();
    if (job->cancelled()) {
      log(http_req, 503, &results[0], req->n);
      return reply_cancelled(res, *dialect);
    }
    log(http_req, 200, &results[0], req->n);
    if (const GenerationResult* failed = job->first_failure()) {
      if (failed->request_fault) throw ApiError(400, failed->error, req->grammar_param);
      throw std::runtime_error(failed->error);
    }
    res.set_content(dump_json(dialect->whole(*req, cid, results, token_text())), "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  const std::string method = http_req.method, path = http_req.path;
  res.set_chunked_content_provider(
      dialect->stream_type(),
      [this, req, dialect, job, cid, method, path, in_flight_guard, grammar_memory](size_t, httplib::DataSink& sink) {
        const bool sent = dialect->stream(*req, *job, cid, sink, stream_context());
        if (!sent) {
          job->cancel();
          std::vector<JobHandle::Piece> rest;
          wait_for(*job, rest);  // the results are complete once it is done
        }
        httplib::Request logged;
        logged.method = method, logged.path = path;
        log(logged, 200, &job->results()[0], req->n);
        return sent;
      });
}

void HttpServer::Impl::embed(const httplib::Request& http_req, const std::string& body, httplib::Response& res) {
  const int64_t n_embd = model().config.n_embd;
  const EmbeddingRequest req = parse_embedding_request(parse_body(body), n_embd, model().config.n_vocab);
  if (static_cast<int64_t>(req.inputs.size()) * n_embd > kMaxEmbeddingValues)
    throw ApiError(400,
                   fmt::format("{} inputs of {} values each are over the {} values one answer "
                               "holds; send at most {} inputs per request",
                               req.inputs.size(), n_embd, kMaxEmbeddingValues,
                               kMaxEmbeddingValues / n_embd),
                   "input");
  std::vector<std::vector<int32_t>> prompts;
  int64_t tokens = 0;
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const auto& in = req.inputs[i];
    std::vector<int32_t> ids = in.ids.empty() ? engine->prompts.input_tokens(in.text, i) : in.ids;
    engine->prompts.check_context(ids.size(), fmt::format("input {}", i), "input");
    tokens += static_cast<int64_t>(ids.size());
    prompts.push_back(std::move(ids));
  }
  if (abandoned()) return reply_cancelled(res);
  std::vector<std::shared_ptr<JobHandle>> jobs;
  std::vector<std::vector<float>> vectors;
  auto cancel_all = [&] {
    for (auto& j : jobs) j->cancel();
  };
  const size_t window = static_cast<size_t>(scheduler().n_slots());
  for (size_t next = 0, done = 0; done < prompts.size();) {
    while (next < prompts.size() && next - done < window) {
      JobRequest job;
      job.prompt = std::move(prompts[next++]);
      job.params.max_tokens = 0;
      job.embed = engine->pooling;
      auto handle = scheduler().submit(job);
      if (!handle && next - 1 > done) {  // the queue is full: wait for one of ours first
        prompts[--next] = std::move(job.prompt);
        break;
      }
      if (!handle) {
        cancel_all();
        throw ApiError(503, "the server is busy: its queue is full; retry later", "", "overloaded");
      }
      jobs.push_back(std::move(handle));
    }
    std::vector<JobHandle::Piece> pieces;
    JobHandle& job = *jobs[done++];
    wait_for(job, pieces);
    if (job.cancelled()) {
      cancel_all();
      log(http_req, 503, nullptr);
      return reply_cancelled(res);
    }
    if (const GenerationResult* failed = job.first_failure()) {
      cancel_all();
      throw std::runtime_error(failed->error);
    }
    vectors.push_back(job.embedding());
  }
  res.set_content(dump_json(embedding_response(vectors, req.base64, options.model_name, tokens)),
                  "application/json");
  log(http_req, 200, nullptr);
}

}  // namespace strata
