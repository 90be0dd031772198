// The APIs beside OpenAI's: Ollama's /api/chat and /api/generate run as any completion (their
// requests translated, their replies in Ollama's dialect), /api/tags, /api/ps, /api/show and
// /api/version describe_model the model served; llama-server's own /completion.
#include <fmt/format.h>
#include <sys/stat.h>

#include <ctime>

#include "core/sha256.h"
#include "format/file_type.h"
#include "server/llama_completion.h"
#include "server/server_impl.h"

namespace strata {

namespace {

std::string modified_time(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "1970-01-01T00:00:00Z";
  std::tm utc{};
  gmtime_r(&st.st_mtim.tv_sec, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                     utc.tm_hour, utc.tm_min, utc.tm_sec);
}

OllamaModel describe_model(const Model& model, const std::string& name, const ChatTemplate& chat_template,
                     int64_t context) {
  const GgufFile& f = *model.file;
  OllamaModel m;
  m.name = name;
  m.architecture = model.config.architecture;
  m.file_bytes = f.file_size();
  m.modified_at = modified_time(f.path());
  std::optional<uint32_t> file_type;
  if (f.find("general.file_type") != nullptr) file_type = static_cast<uint32_t>(f.get_int("general.file_type"));
  std::vector<DType> types;
  for (const auto& t : f.tensors()) {
    types.push_back(t.type);
    m.parameters += t.n_elements;
  }
  m.quantization = file_mixture_name(file_type, types);
  // Ollama names the type alone; llama.cpp marks one read from the tensors "(guessed)".
  if (m.quantization.rfind("(guessed) ", 0) == 0) m.quantization = m.quantization.substr(10);
  m.context_length = context;
  m.embedding_length = model.config.n_embd;
  m.chat_template = chat_template.source();
  m.tools = m.chat_template.find("tools") != std::string::npos;
  m.digest = sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}", f.path(), m.file_bytes, m.modified_at, m.quantization,
                                    m.chat_template));
  return m;
}

}  // namespace

void HttpServer::Impl::ollama_routes() {
  ollama_generation_routes();
  ollama_embedding_routes();
  ollama_model_routes();
  llama_server_routes();
}

void HttpServer::Impl::ollama_generation_routes() {
  auto generation = [this](bool chat_endpoint) {
    return body_route(ollama_dialect({}, chat_endpoint, false),  // errors in Ollama's shape
                      [this, chat_endpoint](const httplib::Request& req, httplib::Response& res,
                                            const std::string& body, const std::shared_ptr<InFlight>& guard,
                                            RequestMemory::Reservation& memory) {
      const OllamaRequest o = translate_ollama_request(parse_body(body), chat_endpoint, scheduler().slot_context());
      const OllamaStamp stamp{o.openai.value("model", options.model_name), ollama_time_now()};
      if (o.load_only) {
        res.set_content(dump_json(ollama_loaded(stamp)), "application/json");
        log(req, 200, nullptr);
        return;
      }
      const bool chat = o.openai.contains("messages");
      auto parsed =
          std::make_shared<CompletionRequest>(parse_completion_request(dump_json(o.openai), chat, options.defaults));
      complete(req, parsed, ollama_dialect(stamp, o.chat_reply, o.stream), res, guard, memory);
    });
  };
  http.Post("/api/chat", generation(true));
  http.Post("/api/generate", generation(false));
}

void HttpServer::Impl::ollama_embedding_routes() {
  // /api/embed and the older /api/embeddings: the embeddings path, its answer reshaped.
  auto embedding = [this](bool legacy) {
    return body_route(ollama_dialect({}, false, false),
                      [this, legacy](const httplib::Request& req, httplib::Response& res, const std::string& text,
                                     const std::shared_ptr<InFlight>&, RequestMemory::Reservation&) {
      const json body = parse_body(text);
      const json openai = translate_ollama_embed(body, legacy);
      const auto start = std::chrono::steady_clock::now();
      embed(req, dump_json(openai), res);
      if (res.status != 200 && res.status != -1) return;  // cancelled: embed answered
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string name = body.value("model", options.model_name);
      res.set_content(dump_json(ollama_embed_reply(json::parse(res.body), name, legacy, seconds)), "application/json");
    });
  };
  http.Post("/api/embed", embedding(false));
  http.Post("/api/embeddings", embedding(true));
}

void HttpServer::Impl::ollama_model_routes() {
  const auto described = [this] {
    return describe_model(model(), options.model_name, chat_template(), scheduler().slot_context());
  };
  http.Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump_json({{"version", kOllamaApiVersion}}), "application/json");
  });
  http.Get("/api/tags", [described](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump_json(ollama_tags(described())), "application/json");
  });
  http.Get("/api/ps", [described](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump_json(ollama_ps(described())), "application/json");
  });
  http.Post("/api/show", [this, described](const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& reader) {
    RequestMemory::Reservation memory(request_memory);
    answer(
        req, res,
        [&] {
          const json body = parse_body(intake.read_body(req, reader, res, memory));
          if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
          res.set_content(dump_json(ollama_show(described())), "application/json");
        },
        *ollama_dialect({}, false, false));
  });
}

void HttpServer::Impl::llama_server_routes() {
  http.Post("/completion", body_route(llama_completion_dialect(), [this](const httplib::Request& req,
                                                                         httplib::Response& res, const std::string& body,
                                                                         const std::shared_ptr<InFlight>& guard,
                                                                         RequestMemory::Reservation& memory) {
    check_llama_completion_fields(parse_body(body));
    complete(req, std::make_shared<CompletionRequest>(parse_completion_request(body, false, options.defaults)),
             llama_completion_dialect(), res, guard, memory);
  }));
  http.Post("/infill", body_route(llama_completion_dialect(), [this](const httplib::Request& req,
                                                                     httplib::Response& res, const std::string& text,
                                                                     const std::shared_ptr<InFlight>& guard,
                                                                     RequestMemory::Reservation& memory) {
    json body = parse_body(text);
    check_llama_completion_fields(body);
    body["prompt"] = infill_tokens(*model().tokenizer, body);
    for (const char* key : {"input_prefix", "input_suffix", "input_extra", "spm_infill"}) body.erase(key);
    complete(req, std::make_shared<CompletionRequest>(parse_completion_request(dump_json(body), false, options.defaults)),
             llama_completion_dialect(), res, guard, memory);
  }));
}

}  // namespace strata
