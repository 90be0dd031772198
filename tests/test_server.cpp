// The server's parts: chat formats, special-token parsing, request validation, the generator
// (stop strings, streaming, prefix reuse) and the HTTP API end to end on a free local port.
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "core/error.h"
#include "generation/generator.h"
#include "server/http_server.h"
#include "server/openai_api.h"
#include "server_fixture.h"

namespace strata {
namespace {

using namespace strata::testing;

TEST(Server, SpecialTokensWrittenInTheTextBecomeThoseTokens) {
  const auto model = Model::load(shipped_model());
  const Tokenizer& tok = *model->tokenizer;
  const auto plain = tok.encode("Amen", false);
  const auto special = tok.encode("Amen</s><s>Amen", false, /*parse_special=*/true);
  // "Amen", EOS, BOS, then "Amen" without SentencePiece's start-of-text space.
  ASSERT_GE(special.size(), 2 * plain.size());
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), special.begin()));
  EXPECT_EQ(special[plain.size()], tok.eos());
  EXPECT_EQ(special[plain.size() + 1], tok.bos());
  EXPECT_EQ(tok.decode({special.begin() + plain.size() + 2, special.end()}), "Amen");
  // Without parsing, "</s>" is spelled with ordinary tokens.
  const auto spelled = tok.encode("Amen</s>", false);
  EXPECT_EQ(std::count(spelled.begin(), spelled.end(), tok.eos()), 0);
}

TEST(Server, Utf8PrefixHoldsBackAnIncompleteCharacter) {
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("a\xC3"), 1u);              // first byte of é
  EXPECT_EQ(complete_utf8_prefix("a\xC3\xA9"), 3u);          // é
  EXPECT_EQ(complete_utf8_prefix("a\xE2\x82"), 1u);          // 2 of the 3 bytes of €
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98\x80x"), 5u);  // emoji then x
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98"), 0u);
}

TEST(Server, RequestsWithWrongFieldsAreRefusedNamingTheField) {
  const ServerDefaults d;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", ""},
      {"[1]", ""},
      {R"({})", "prompt"},
      {R"({"prompt": 5})", "prompt"},
      {R"({"prompt": ["a", "b"]})", "prompt"},
      {R"({"prompt": [1, -2]})", "prompt"},
      {R"({"prompt": "a", "max_tokens": "ten"})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": -5})", "max_tokens"},
      // Issue 29: 0 generated one token; OpenAI's minimum is 1, and -1 is llama.cpp's.
      {R"({"prompt": "a", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": -1})", "max_tokens"},
      {R"({"prompt": "a", "max_completion_tokens": 0})", "max_completion_tokens"},
      {R"({"prompt": "a", "n_predict": -2})", "n_predict"},
      {R"({"prompt": "a", "temperature": -1})", "temperature"},
      {R"({"prompt": "a", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "a", "top_k": 2.5})", "top_k"},
      {R"({"prompt": "a", "stop": [1]})", "stop"},
      {R"({"prompt": "a", "stream": "yes"})", "stream"},
      {R"({"prompt": "a", "n": 17})", "n"},
      {R"({"prompt": "a", "n": 0})", "n"},
      {R"({"prompt": "a", "presence_penalty": 2.5})", "presence_penalty"},
      {R"({"prompt": "a", "frequency_penalty": "high"})", "frequency_penalty"},
      {R"({"prompt": "a", "logit_bias": {"x": 3}})", "logit_bias"},
      {R"({"prompt": "a", "logit_bias": {"5": 101}})", "logit_bias"},
      {R"({"prompt": "a", "logit_bias": [[5]]})", "logit_bias"},
      {R"({"prompt": "a", "logit_bias": 3})", "logit_bias"},
      {R"({"prompt": "a", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "a", "logprobs": true})", "logprobs"},
      {R"({"prompt": "a", "top_logprobs": 2})", "top_logprobs"},
      {R"({"prompt": "a", "echo": true})", "echo"},
      // Output formats that are malformed, cannot be enforced or conflict; tools without tools.
      {R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {}}})",
       "response_format"},
      {R"({"prompt": "a", "response_format": "text"})", "response_format"},
      {R"({"prompt": "a", "response_format": {"type": "yaml"}})", "response_format"},
      {R"({"prompt": "a", "grammar": "root ::= \"x"})", "grammar"},
      {R"({"prompt": "a", "grammar": 5})", "grammar"},
      {R"({"prompt": "a", "json_schema": {"type": "object", "minProperties": 1}})", "json_schema"},
      {R"({"prompt": "a", "json_schema": {}, "grammar": "root ::= \"x\""})", "grammar"},
      {R"({"prompt": "a", "tool_choice": "auto"})", "tool_choice"},
      {R"({"prompt": "a", "tools": [{"type": "function", "function": {"name": "f"}}]})", "tools"},
      {R"({"prompt": "a", "model": 7})", "model"},
  };
  // Accepted: the formats strata enforces compile into a grammar.
  for (const char* body : {R"({"prompt": "a", "response_format": {"type": "json_object"}})",
                           R"({"prompt": "a", "grammar": "root ::= \"x\""})",
                           R"({"prompt": "a", "json_schema": {"type": "object"}})"})
    EXPECT_NE(parse_completion_request(body, false, d).generation.grammar, nullptr) << body;
  for (const auto& [body, param] : cases) {
    try {
      parse_completion_request(body, false, d);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << body;
      EXPECT_EQ(e.param, param) << body << ": " << e.what();
    }
  }
  const std::vector<std::pair<std::string, std::string>> chat_cases = {
      {R"({"messages": []})", "messages"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "robot", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 3}]})", "messages[0].content"},
      {R"({"messages": [{"role": "assistant", "content": null}]})", "messages[0].content"},
      {R"({"messages": [{"role": "assistant"}, {"role": "user", "content": "x"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "assistant", "content": null, "tool_calls": []}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 3})", "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
           "top_logprobs": 21})",
       "top_logprobs"},
  };
  for (const auto& [body, param] : chat_cases) {
    try {
      parse_completion_request(body, true, d);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, param) << body << ": " << e.what();
    }
  }
  // What clients commonly send is accepted.
  const auto ok = parse_completion_request(
      R"({"model": "x", "prompt": ["hi"], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
          "stop": ["\n", "."], "stream": true, "presence_penalty": 0, "n": 1, "logprobs": null,
          "seed": 42, "stream_options": {"include_usage": true},
          "response_format": {"type": "text"}, "tool_choice": "none", "frequency_penalty": 0.5,
          "logit_bias": {"17": -100, "5": 2.5}})",
      false, d);
  EXPECT_EQ(ok.prompt, "hi");
  EXPECT_EQ(ok.generation.max_tokens, 7);
  EXPECT_FLOAT_EQ(ok.generation.sampling.temperature, 0.5f);
  EXPECT_EQ(ok.generation.stop.size(), 2u);
  EXPECT_TRUE(ok.stream && ok.include_usage);
  EXPECT_EQ(ok.generation.sampling.seed, 42u);
  const auto chat = parse_completion_request(
      R"({"messages": [{"role": "developer", "content": "s"},
                       {"role": "user", "content": [{"type": "text", "text": "a"},
                                                    {"type": "text", "text": "b"}]}]})",
      true, d);
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[1].content, "ab");
}

TEST(Server, GeneratorStopsAtStopStringsAndStreamsTheSameText) {
  const auto model = Model::load(shipped_model());
  ThreadPool pool(2);
  Session session(*model, 128, pool);
  Generator gen(*model, session);
  const auto prompt = model->tokenizer->encode("In the beginning", true);
  const GenerationResult full = gen.generate(prompt, greedy(24));
  ASSERT_EQ(full.completion_tokens, 24);
  EXPECT_EQ(full.finish_reason, "length");
  // Stop at a word from the middle of the greedy text: the text ends right before it.
  const size_t at = full.text.find(' ', full.text.size() / 2);
  ASSERT_NE(at, std::string::npos);
  const std::string stop = full.text.substr(at, 4);
  GenerationParams p = greedy(24);
  p.stop = {"never appears \x01", stop};
  std::string streamed;
  const GenerationResult cut = gen.generate(prompt, p, [&](std::string_view t) {
    streamed += t;
    return true;
  });
  EXPECT_EQ(cut.finish_reason, "stop");
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(streamed, cut.text);
  EXPECT_LT(cut.completion_tokens, 24);
  // Cancelling from the callback stops generation.
  int calls = 0;
  const GenerationResult cancelled =
      gen.generate(prompt, greedy(24), [&](std::string_view) { return ++calls < 3; });
  EXPECT_TRUE(cancelled.cancelled);
  EXPECT_EQ(calls, 3);
  EXPECT_LT(cancelled.completion_tokens, 24);
}

TEST(Server, GeneratorReusesTheSharedPrefixWithTheSameResult) {
  const auto model = Model::load(shipped_model());
  ThreadPool pool(2);
  Session session(*model, 128, pool);
  Generator gen(*model, session);
  const Tokenizer& tok = *model->tokenizer;
  const auto first = tok.encode("And God said, Let there be light", true);
  const GenerationResult a = gen.generate(first, greedy(8));
  EXPECT_EQ(a.cached_tokens, 0);
  // The follow-up extends the first prompt and its answer: only the new part is evaluated.
  auto second = first;
  const auto answer = tok.encode(a.text, false);
  second.insert(second.end(), answer.begin(), answer.end());
  const auto more = tok.encode(" and the evening", false);
  second.insert(second.end(), more.begin(), more.end());
  const GenerationResult b = gen.generate(second, greedy(8));
  EXPECT_GE(b.cached_tokens, static_cast<int64_t>(first.size()));
  // The same request on a fresh session gives the same text.
  Session fresh_session(*model, 128, pool);
  Generator fresh(*model, fresh_session);
  const GenerationResult c = fresh.generate(second, greedy(8));
  EXPECT_EQ(c.cached_tokens, 0);
  EXPECT_EQ(b.text, c.text);
  // A prompt that does not fit, or an id outside the vocabulary, is a clear error.
  EXPECT_THROW(gen.generate(std::vector<int32_t>(128, 5), greedy(1)), Error);
  EXPECT_THROW(gen.generate({1, 999999}, greedy(1)), Error);
  EXPECT_THROW(gen.generate({}, greedy(1)), Error);
}

TEST_F(ServerHttp, CompletionsChatModelsAndHealth) {
  const auto health = client_->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(nlohmann::json::parse(health->body)["status"], "ok");
  const auto models = client_->Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(nlohmann::json::parse(models->body)["data"][0]["id"], "tiny");

  const auto c =
      post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 12})", 200);
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["completion_tokens"], 12);
  // The same greedy text as the generator gives directly.
  Session s(*model_, 64, pool_);
  Generator g(*model_, s);
  const auto direct = g.generate(model_->tokenizer->encode("In the beginning", true), greedy(12));
  EXPECT_EQ(c["choices"][0]["text"], direct.text);

  const auto chat = post("/v1/chat/completions",
                         R"({"messages": [{"role": "user", "content": "Who made the light?"}],
                             "max_tokens": 6})",
                         200);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(chat["choices"][0]["message"]["content"].is_string());
}

// The chat template chosen at start renders every chat request: the prompt is its text (the
// usage counts its tokens, the BOS it writes not doubled), /props shows it, its own refusals are
// a 400 naming messages, and a template strata cannot run stops the server from starting.
TEST_F(ServerHttp, ChatRequestsAreRenderedByTheChosenTemplate) {
  slot_context_ = 256;  // llama3's markers are many tokens to this model
  restart([](ServerOptions& o) { o.chat_template = "llama3"; });
  const Tokenizer& tok = *model_->tokenizer;
  const std::string bos = tok.token_text(tok.bos());
  const ChatTemplate llama3 = ChatTemplate::select("llama3", "", bos, tok.token_text(tok.eos()));
  const std::string text = llama3.apply(std::vector<ChatMessage>{{"user", "Who made the light?"}}).text;
  ASSERT_EQ(text.compare(0, bos.size(), bos), 0) << text;
  const auto chat = post("/v1/chat/completions",
                         R"({"messages": [{"role": "user", "content": "Who made the light?"}],
                             "max_tokens": 2})",
                         200);
  EXPECT_EQ(chat["usage"]["prompt_tokens"], tok.encode(text, false, true).size());
  const auto props = client_->Get("/props");
  ASSERT_TRUE(props);
  EXPECT_EQ(nlohmann::json::parse(props->body)["chat_template"], *ChatTemplate::builtin_source("llama3"));

  restart([](ServerOptions& o) { o.chat_template = "gemma"; });
  const auto refused = post("/v1/chat/completions",
                            R"({"messages": [{"role": "system", "content": "Be brief."},
                                             {"role": "user", "content": "Hi"}]})",
                            400);
  EXPECT_EQ(refused["error"]["param"], "messages");
  EXPECT_EQ(refused["error"]["message"],
            "the chat template refused the messages: System role not supported");

  ServerOptions bad;
  bad.port = 0;
  bad.chat_template = "/nonexistent/template.jinja";
  EXPECT_THROW(HttpServer(*model_, *session_, bad), Error);
}

// llama-server's /tokenize and /detokenize: the model's own tokens (BOS with add_special), the
// pieces (a byte token's piece as its byte values), a round trip back to the text, bad fields
// and ids outside the vocabulary refused naming the field.
TEST_F(ServerHttp, TokenizeAndDetokenizeAsLlamaServerDoes) {
  const Tokenizer& tok = *model_->tokenizer;
  const std::string text = "In the beginning God created";
  const auto plain = post("/tokenize", nlohmann::json{{"content", text}}.dump(), 200);
  const std::vector<int32_t> ids = tok.encode(text, false, true);
  EXPECT_EQ(plain["tokens"].get<std::vector<int32_t>>(), ids);
  const auto special =
      post("/tokenize", nlohmann::json{{"content", text}, {"add_special", true}}.dump(), 200);
  EXPECT_EQ(special["tokens"].get<std::vector<int32_t>>(), tok.encode(text, true, true));
  const auto pieces =
      post("/tokenize", nlohmann::json{{"content", text}, {"with_pieces", true}}.dump(), 200);
  std::string joined, expected;
  for (const auto& t : pieces["tokens"]) {
    ASSERT_TRUE(t["piece"].is_string()) << t.dump();
    joined += t["piece"].get<std::string>();
    expected += tok.token_bytes(t["id"].get<int32_t>());
  }
  EXPECT_EQ(joined, expected);  // the pieces as they are (SentencePiece's leading space too)
  EXPECT_NE(joined.find(text), std::string::npos);
  const auto back = post("/detokenize", nlohmann::json{{"tokens", ids}}.dump(), 200);
  EXPECT_EQ(back["content"], tok.decode(ids));
  // A lone byte of a multi-byte character comes back as its value, not as broken text.
  const auto bytes = post("/tokenize",
                          nlohmann::json{{"content", "\xc3\xa9\xe2\x82\xac"}, {"with_pieces", true}}.dump(),
                          200);
  std::string spelled;
  int as_bytes = 0;
  for (const auto& t : bytes["tokens"]) {
    if (t["piece"].is_array()) {
      ++as_bytes;
      for (const auto& b : t["piece"]) spelled += static_cast<char>(b.get<int>());
    } else {
      spelled += t["piece"].get<std::string>();
    }
  }
  EXPECT_GT(as_bytes, 0) << "the tiny vocabulary spells these characters with byte tokens";
  EXPECT_NE(spelled.find("\xc3\xa9\xe2\x82\xac"), std::string::npos);
  // /props: the defaults, the slots, the model.
  const auto props = client_->Get("/props");
  ASSERT_TRUE(props);
  const auto pj = nlohmann::json::parse(props->body);
  EXPECT_EQ(pj["model_alias"], "tiny");
  EXPECT_GE(pj["total_slots"].get<int>(), 1);
  EXPECT_GT(pj["default_generation_settings"]["n_ctx"].get<int64_t>(), 0);
  EXPECT_TRUE(pj["default_generation_settings"]["params"]["temperature"].is_number());
  EXPECT_TRUE(pj["chat_template"].is_string());
  EXPECT_EQ(post("/tokenize", R"({"content": 5})", 400)["error"]["param"], "content");
  EXPECT_EQ(post("/tokenize", R"({"content": "a", "with_pieces": "yes"})", 400)["error"]["param"],
            "with_pieces");
  EXPECT_EQ(post("/detokenize", R"({"tokens": [1, 99999999]})", 400)["error"]["param"], "tokens");
  EXPECT_EQ(post("/detokenize", R"({"tokens": "1 2"})", 400)["error"]["param"], "tokens");
  post("/detokenize", "{not json", 400);
}

// logprobs: each generated token's log-probability and its alternatives, in the completions
// API's shape (tokens, token_logprobs, top_logprobs, text_offset) and the chat API's (content
// entries with bytes), whole and streamed; greedy picks each step's most likely token, and the
// tokens spell the text.
TEST_F(ServerHttp, LogprobsComeInEachApisShapeWholeAndStreamed) {
  const auto c = post("/v1/completions",
                      R"({"prompt": "In the beginning", "max_tokens": 8, "temperature": 0,
                          "logprobs": 3})",
                      200);
  const auto& lp = c["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << c.dump();
  std::string spelled;
  int64_t offset = 0;
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    const std::string piece = lp["tokens"][i];
    EXPECT_EQ(lp["text_offset"][i].get<int64_t>(), offset);
    offset += static_cast<int64_t>(piece.size());
    spelled += piece;
    const float chosen = lp["token_logprobs"][i];
    EXPECT_LE(chosen, 0.0f);
    ASSERT_EQ(lp["top_logprobs"][i].size(), 3u);
    float best = -INFINITY;
    for (const auto& [text, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<float>());
    EXPECT_FLOAT_EQ(chosen, best) << "greedy takes the most likely token, step " << i;
  }
  EXPECT_EQ(lp["tokens"].size(), 8u);
  EXPECT_NE(spelled.find(c["choices"][0]["text"].get<std::string>()), std::string::npos);
  const auto chat = post("/v1/chat/completions",
                         R"({"messages": [{"role": "user", "content": "Who made the light?"}],
                             "max_tokens": 5, "logprobs": true, "top_logprobs": 2})",
                         200);
  const auto& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u) << chat.dump();
  for (const auto& t : content) {
    EXPECT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_EQ(t["bytes"].size(), t["token"].get<std::string>().size());
  }
  // Streamed: the chunks' tokens are the whole reply's.
  const auto res = client_->Post("/v1/completions",
                                 R"({"prompt": "In the beginning", "max_tokens": 8,
                                     "temperature": 0, "logprobs": 3, "stream": true})",
                                 "application/json");
  ASSERT_TRUE(res);
  std::vector<std::string> streamed;
  size_t pos = 0;
  while ((pos = res->body.find("data: {", pos)) != std::string::npos) {
    const size_t end = res->body.find("\n\n", pos);
    const auto chunk = nlohmann::json::parse(res->body.substr(pos + 6, end - pos - 6));
    const auto& l = chunk["choices"][0]["logprobs"];
    if (l.is_object())
      for (const auto& t : l["tokens"]) streamed.push_back(t);
    pos = end;
  }
  EXPECT_EQ(streamed, lp["tokens"].get<std::vector<std::string>>());
}

TEST_F(ServerHttp, StreamingSendsServerSentEventsThatAddUpToTheText) {
  const auto whole =
      post("/v1/completions", R"({"prompt": "And God said", "max_tokens": 10})", 200);
  std::string events;
  const auto res = client_->Post("/v1/completions",
                                 R"({"prompt": "And God said", "max_tokens": 10, "stream": true,
          "stream_options": {"include_usage": true}})",
                                 "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  std::string text, finish;
  int usage_tokens = -1;
  bool done = false;
  size_t pos = 0;
  while ((pos = res->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = res->body.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos);
    const std::string data = res->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const auto j = nlohmann::json::parse(data);
    text += j["choices"][0]["text"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
    if (j.contains("usage")) usage_tokens = j["usage"]["completion_tokens"];
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage_tokens, 10);
  EXPECT_EQ(text, whole["choices"][0]["text"].get<std::string>());
}

TEST_F(ServerHttp, BadRequestsGetJsonErrors) {
  auto e = post("/v1/completions", "{not json", 400);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  e = post("/v1/completions", R"({"prompt": "a", "temperature": "hot"})", 400);
  EXPECT_EQ(e["error"]["param"], "temperature");
  // A prompt longer than the context (64 tokens here).
  std::string long_prompt;
  for (int i = 0; i < 80; ++i) long_prompt += " and";
  e = post("/v1/completions", nlohmann::json{{"prompt", long_prompt}}.dump(), 400);
  EXPECT_EQ(e["error"]["code"], "context_length_exceeded");
  e = post("/v1/completions", R"({"prompt": [1, 5000]})", 400);
  EXPECT_EQ(e["error"]["param"], "prompt");
  e = post("/v1/completions", R"({"prompt": "a", "logit_bias": {"5000": 1}})", 400);
  EXPECT_EQ(e["error"]["param"], "logit_bias");
  // Banned tokens never come out: the greedy text's tokens banned (llama.cpp's array form,
  // false), the greedy text changes.
  const auto free_text = post("/v1/completions",
                              R"({"prompt": "In the beginning", "max_tokens": 8, "temperature": 0})",
                              200)["choices"][0]["text"].get<std::string>();
  nlohmann::json bans = nlohmann::json::array();
  for (const int32_t id : model_->tokenizer->encode(free_text, false)) bans.push_back({id, false});
  const auto banned = post("/v1/completions",
                           nlohmann::json{{"prompt", "In the beginning"},
                                          {"max_tokens", 8},
                                          {"temperature", 0},
                                          {"logit_bias", bans}}
                               .dump(),
                           200)["choices"][0]["text"].get<std::string>();
  EXPECT_NE(banned, free_text);
  e = post("/v1/nothing", "{}", 404);
  EXPECT_EQ(e["error"]["type"], "not_found_error");
  e = post("/v1/completions", std::string(5000, ' '), 413);  // over max_body_bytes
  EXPECT_TRUE(e["error"]["message"].is_string());
  // Without the key.
  httplib::Client anonymous("127.0.0.1", port_);
  const auto res = anonymous.Post("/v1/completions", R"({"prompt": "a"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(nlohmann::json::parse(res->body)["error"]["type"], "authentication_error");
  // The server still answers after all that.
  post("/v1/completions", R"({"prompt": "a", "max_tokens": 1})", 200);
}

// Issue 29: a limit of 0 sampled and counted one token before checking. llama.cpp's
// n_predict 0 evaluates the prompt and generates nothing, streamed or not.
TEST_F(ServerHttp, NPredictZeroGeneratesNoToken) {
  const auto c = post("/v1/completions", R"({"prompt": "In the beginning", "n_predict": 0})", 200);
  EXPECT_EQ(c["choices"][0]["text"], "");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["completion_tokens"], 0);
  EXPECT_GT(c["usage"]["prompt_tokens"], 0);
  const auto res = client_->Post(
      "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "hi"}], "n_predict": 0, "stream": true})",
      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find(R"("finish_reason":"length")"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("data: [DONE]"), std::string::npos) << res->body;
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// The shipped model's template (the plain transcript) never mentions tools: a request with
// tools, a tool result or an assistant's tool call is refused, not rendered without them.
using ToolsServer = strata::testing::ServerHttp;
TEST_F(ToolsServer, ToolsWithATemplateWithoutThemAreRefused) {
  nlohmann::json e = post("/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "x"}],
                              "tools": [{"type": "function", "function": {"name": "f"}}]})",
                          400);
  EXPECT_EQ(e["error"]["param"], "tools");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("has no place for tools"), std::string::npos);
  e = post("/v1/chat/completions",
           R"({"messages": [{"role": "user", "content": "x"},
                            {"role": "assistant", "content": null, "tool_calls": [
                              {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                            {"role": "tool", "content": "1"}]})",
           400);
  EXPECT_EQ(e["error"]["param"], "messages");
  // Without tools the same template renders as before.
  post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2})", 200);
}

}  // namespace
}  // namespace strata
