// Ollama's API: requests translated as Ollama means them (options, format, generate's raw and
// system, the load call), refusals naming the field, and on the shipped model: /api/chat and
// /api/generate answer exactly what the OpenAI endpoints answer for the same request, streamed
// as NDJSON lines that add up to the whole reply, with Ollama's counts; /api/tags, /api/show,
// /api/ps and /api/version describe the model. tests/ollama_client.sh runs the npm `ollama`
// client against strata serve. And llama-server's own /completion: its reply fields, its stream,
// its stop_type and stopping_word, its refusals.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/sha256.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "server/llama_completion.h"
#include "server/ollama_api.h"
#include "server_fixture.h"

namespace strata {
namespace {

using nlohmann::json;
using strata::testing::ServerHttp;

TEST(Sha256, FipsTestVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a' fed in uneven pieces: the buffering across blocks.
  Sha256 s;
  const std::string a(1000, 'a');
  for (size_t done = 0, step = 1; done < 1'000'000; done += step, step = step % 997 + 1)
    s.update(std::string_view(a).substr(0, std::min(step, 1'000'000 - done)));
  EXPECT_EQ(s.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

OllamaRequest translate(const char* body, bool chat) { return translate_ollama_request(json::parse(body), chat, 512); }

TEST(OllamaApi, ChatAndGenerateReadAsOllamaMeansThem) {
  const OllamaRequest chat = translate(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
      "options": {"temperature": 0.5, "top_k": 3, "num_predict": -2, "seed": 7, "stop": ["x"], "num_ctx": 256},
      "format": "json", "keep_alive": "5m"})", true);
  EXPECT_TRUE(chat.stream);  // Ollama streams unless told not to
  EXPECT_TRUE(chat.chat_reply);
  EXPECT_EQ(chat.openai["temperature"], 0.5);
  EXPECT_EQ(chat.openai["top_k"], 3);
  EXPECT_EQ(chat.openai["n_predict"], -1);
  EXPECT_EQ(chat.openai["seed"], 7);
  EXPECT_EQ(chat.openai["stop"], json::array({"x"}));
  EXPECT_EQ(chat.openai["response_format"]["type"], "json_object");
  EXPECT_EQ(chat.openai["messages"][0]["content"], "hi");
  EXPECT_EQ(chat.openai["stream"], false);

  const OllamaRequest schema = translate(R"({"messages": [], "stream": false,
      "format": {"type": "object", "properties": {"a": {"type": "integer"}}}})", true);
  EXPECT_FALSE(schema.stream);
  EXPECT_EQ(schema.openai["response_format"]["json_schema"]["schema"]["properties"]["a"]["type"], "integer");

  const OllamaRequest tool_turn = translate(R"({"messages": [
      {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
      {"role": "tool", "content": "42", "tool_name": "f"}]})", true);
  EXPECT_EQ(tool_turn.openai["messages"][0]["tool_calls"][0]["function"]["arguments"], R"({"x":1})");
  EXPECT_EQ(tool_turn.openai["messages"][1]["name"], "f");

  const OllamaRequest gen = translate(R"({"prompt": "Why?", "system": "Be brief."})", false);
  EXPECT_FALSE(gen.chat_reply);
  EXPECT_EQ(gen.openai["messages"], json::parse(R"([{"role": "system", "content": "Be brief."},
                                                     {"role": "user", "content": "Why?"}])"));
  const OllamaRequest raw = translate(R"({"prompt": "In the beginning", "raw": true})", false);
  EXPECT_EQ(raw.openai["prompt"], "In the beginning");
  EXPECT_FALSE(raw.openai.contains("messages"));
  EXPECT_TRUE(translate(R"({"model": "m"})", false).load_only);
}

std::string refusal(const char* body, bool chat) {
  try {
    translate(body, chat);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param + ": " + e.what();
  }
  return "";
}

TEST(OllamaApi, WhatStrataDoesNotHonourIsRefusedNamingTheField) {
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})", true),
            "messages[0].images: images are not supported: the model served reads text only");
  EXPECT_EQ(refusal(R"({"messages": [], "options": {"mirostat": 2}})", true),
            "options.mirostat: 'options.mirostat' is not supported (strata takes temperature, top_p, top_k, "
            "min_p, seed, stop, num_predict, num_ctx, repeat_penalty, presence_penalty, frequency_penalty)");
  EXPECT_EQ(refusal(R"({"messages": [], "options": {"num_ctx": 4096}})", true),
            "options.num_ctx: 'options.num_ctx' must be an integer up to the 512 positions the server gives a "
            "request (strata serve -c)");
  EXPECT_EQ(refusal(R"({"messages": [], "keep_alive": 0})", true),
            "keep_alive: 'keep_alive' 0 asks to unload the model: strata serves one model that stays loaded");
  EXPECT_EQ(refusal(R"({"messages": [], "think": true})", true),
            "think: 'think' is not supported: strata has no thinking mode for this model");
  EXPECT_EQ(refusal(R"({"messages": [], "format": "yaml"})", true), "format: 'format' must be \"json\" or a JSON schema");
  EXPECT_EQ(refusal(R"({"prompt": "x", "template": "{{ .Prompt }}"})", false),
            "template: 'template' is not supported: strata renders the model's chat template");
  EXPECT_EQ(refusal(R"({"prompt": "x", "context": [1, 2]})", false),
            "context: 'context' is not supported: send the conversation to /api/chat");
  EXPECT_EQ(refusal(R"({"prompt": "x", "raw": true, "system": "s"})", false),
            "system: 'system' with 'raw' has no template to go in");
  EXPECT_EQ(refusal(R"({"messages": "hi"})", true), "messages: 'messages' must be an array of messages");
}

TEST(OllamaApi, ParameterSizesAsOllamaShowsThem) {
  EXPECT_EQ(ollama_parameter_size(1'100'048'384), "1.1B");
  EXPECT_EQ(ollama_parameter_size(14'770'033'664), "14.8B");
  EXPECT_EQ(ollama_parameter_size(350'000'000), "350M");
  EXPECT_EQ(ollama_parameter_size(260'000), "260K");
}

class ServerOllama : public ServerHttp {
 protected:
  // NDJSON lines of a streamed reply.
  std::vector<json> lines(const std::string& path, const std::string& body) {
    const auto res = client_->Post(path, body, "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/x-ndjson");
    std::vector<json> out;
    std::istringstream in(res->body);
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
};

TEST_F(ServerOllama, ChatAnswersAsTheOpenAiEndpointAndStreamsTheSameText) {
  const char* messages = R"([{"role": "user", "content": "In the beginning"}])";
  const json openai = post("/v1/chat/completions",
                           fmt::format(R"({{"messages": {}, "max_tokens": 8, "temperature": 0}})", messages), 200);
  const json whole = post("/api/chat", fmt::format(R"({{"model": "tiny", "messages": {}, "stream": false,
      "options": {{"temperature": 0, "num_predict": 8}}}})", messages), 200);
  EXPECT_EQ(whole["model"], "tiny");
  EXPECT_EQ(whole["message"]["role"], "assistant");
  EXPECT_EQ(whole["message"]["content"], openai["choices"][0]["message"]["content"]);
  EXPECT_EQ(whole["done"], true);
  EXPECT_EQ(whole["done_reason"], openai["choices"][0]["finish_reason"]);
  EXPECT_EQ(whole["eval_count"], openai["usage"]["completion_tokens"]);
  EXPECT_GT(whole["prompt_eval_duration"].get<int64_t>(), 0);
  EXPECT_GE(whole["total_duration"].get<int64_t>(), whole["eval_duration"].get<int64_t>());
  EXPECT_EQ(whole["created_at"].get<std::string>().size(), std::string("2026-12-07T10:00:00.000000000Z").size());

  const auto streamed = lines("/api/chat", fmt::format(R"({{"model": "tiny", "messages": {},
      "options": {{"temperature": 0, "num_predict": 8}}}})", messages));
  ASSERT_GE(streamed.size(), 2u);
  std::string text;
  for (size_t i = 0; i + 1 < streamed.size(); ++i) {
    EXPECT_EQ(streamed[i]["done"], false);
    text += streamed[i]["message"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, whole["message"]["content"]);
  EXPECT_EQ(streamed.back()["done"], true);
  EXPECT_EQ(streamed.back()["message"]["content"], "");
  EXPECT_EQ(streamed.back()["eval_count"], whole["eval_count"]);
}

TEST_F(ServerOllama, GenerateRawIsTheCompletionOfThePromptAndAnEmptyPromptLoads) {
  const json openai = post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 6, "temperature": 0})", 200);
  const json raw = post("/api/generate", R"({"prompt": "In the beginning", "raw": true, "stream": false,
      "options": {"temperature": 0, "num_predict": 6}})", 200);
  EXPECT_EQ(raw["response"], openai["choices"][0]["text"]);
  EXPECT_EQ(raw["done"], true);
  const auto streamed = lines("/api/generate", R"({"prompt": "In the beginning", "raw": true,
      "options": {"temperature": 0, "num_predict": 6}})");
  std::string text;
  for (const json& l : streamed) text += l["response"].get<std::string>();
  EXPECT_EQ(text, raw["response"]);
  const json loaded = post("/api/generate", R"({"model": "tiny"})", 200);
  EXPECT_EQ(loaded["done_reason"], "load");
  // Through the chat template, as Ollama renders a prompt that is not raw.
  const json templated = post("/api/generate", R"({"prompt": "hi", "stream": false, "options": {"num_predict": 4}})", 200);
  EXPECT_EQ(templated["done"], true);
}

TEST_F(ServerOllama, FormatConstrainsTheReply) {
  const json r = post("/api/chat", R"({"messages": [{"role": "user", "content": "age?"}], "stream": false,
      "format": {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 150}},
                 "required": ["age"]}, "options": {"num_predict": 40}})", 200);
  if (r["done_reason"] == "stop") {
    const json value = json::parse(r["message"]["content"].get<std::string>());
    EXPECT_GE(value["age"].get<int64_t>(), 0);
    EXPECT_LE(value["age"].get<int64_t>(), 150);
  }
}

TEST_F(ServerOllama, TheModelIsDescribedAndErrorsAreOllamas) {
  const auto tags = client_->Get("/api/tags");
  ASSERT_TRUE(tags);
  const json t = json::parse(tags->body);
  ASSERT_EQ(t["models"].size(), 1u);
  EXPECT_EQ(t["models"][0]["name"], "tiny");
  EXPECT_EQ(t["models"][0]["size"], model_->file->file_size());
  EXPECT_EQ(t["models"][0]["digest"].get<std::string>().size(), 64u);
  EXPECT_EQ(t["models"][0]["details"]["format"], "gguf");
  EXPECT_EQ(t["models"][0]["details"]["family"], model_->config.architecture);
  const json show = post("/api/show", R"({"model": "tiny"})", 200);
  EXPECT_EQ(show["details"]["quantization_level"], t["models"][0]["details"]["quantization_level"]);
  EXPECT_EQ(show["capabilities"][0], "completion");
  EXPECT_EQ(show["model_info"][model_->config.architecture + ".context_length"], slot_context_);
  const auto version = client_->Get("/api/version");
  ASSERT_TRUE(version);
  EXPECT_EQ(json::parse(version->body)["version"], kOllamaApiVersion);
  const auto ps = client_->Get("/api/ps");
  ASSERT_TRUE(ps);
  EXPECT_EQ(json::parse(ps->body)["models"][0]["name"], "tiny");
  const json err = post("/api/chat", R"({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})", 400);
  EXPECT_EQ(err, json({{"error", "images are not supported: the model served reads text only"}}));
  const json bad_json = post("/api/generate", R"({"prompt": )", 400);
  EXPECT_TRUE(bad_json["error"].is_string());
}

TEST_F(ServerOllama, LlamaServerCompletionAnswersAsLlamaServer) {
  const json openai = post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 12, "temperature": 0})", 200);
  const std::string text = openai["choices"][0]["text"];
  const json r = post("/completion", R"({"prompt": "In the beginning", "n_predict": 12, "temperature": 0})", 200);
  EXPECT_EQ(r["content"], text);
  EXPECT_EQ(r["stop"], true);
  EXPECT_EQ(r["tokens_predicted"], 12);
  EXPECT_EQ(r["stop_type"], "limit");
  EXPECT_EQ(r["tokens_evaluated"], openai["usage"]["prompt_tokens"]);
  EXPECT_TRUE(r["timings"].contains("predicted_per_second"));
  EXPECT_EQ(r["generation_settings"]["n_predict"], 12);
  // A stop string from the middle of the greedy text: the text before it, and the word named.
  ASSERT_GE(text.size(), 6u);
  const std::string word = text.substr(text.size() / 2, 2);
  const json stopped = post("/completion", json{{"prompt", "In the beginning"}, {"n_predict", 12}, {"temperature", 0},
                                                {"stop", {word}}}.dump(), 200);
  EXPECT_EQ(stopped["stop_type"], "word");
  EXPECT_EQ(stopped["stopping_word"], word);
  EXPECT_EQ(stopped["content"], text.substr(0, text.find(word)));
  // Streamed: server-sent events whose contents add up, the last with "stop": true, no [DONE].
  const auto res = client_->Post("/completion", R"({"prompt": "In the beginning", "n_predict": 12, "stream": true})",
                                 "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  std::string joined;
  json last;
  std::istringstream in(res->body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    ASSERT_EQ(line.rfind("data: ", 0), 0u) << line;
    last = json::parse(line.substr(6));
    joined += last["content"].get<std::string>();
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(last["stop"], true);
  EXPECT_EQ(last["tokens_predicted"], 12);
  const json refused = post("/completion", R"({"prompt": "x", "mirostat": 2})", 400);
  EXPECT_EQ(refused["error"]["param"], "mirostat");
}

// The shipped model with llama.cpp's fill-in-the-middle keys naming three of its tokens.
std::string fim_model() {
  const std::string path = ::testing::TempDir() + "strata-fim.gguf";
  const auto src = GgufFile::open(strata::testing::shipped_model());
  GgufWriter w(path);
  for (const auto& [k, v] : src->metadata()) w.set(k, v);
  w.set("tokenizer.ggml.fim_pre_token_id", GgufValue::u32(5));
  w.set("tokenizer.ggml.fim_suf_token_id", GgufValue::u32(6));
  w.set("tokenizer.ggml.fim_mid_token_id", GgufValue::u32(7));
  for (const auto& t : src->tensors()) w.add_tensor(t.name, t.type, t.dims);
  for (const auto& t : src->tensors()) w.write_tensor_data({t.data, t.n_bytes});
  w.finish();
  return path;
}

TEST_F(ServerOllama, InfillIsTheCompletionOfLlamaServersFimPrompt) {
  const json refused = post("/infill", R"({"input_prefix": "a", "input_suffix": "b"})", 400);
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("no fill-in-the-middle tokens"), std::string::npos);
  model_path_ = fim_model();
  restart({});
  const Tokenizer& tok = *model_->tokenizer;
  const json body = json::parse(R"({"input_prefix": "In the beginning", "input_suffix": " the earth.", "prompt": " God"})");
  std::vector<int32_t> want{tok.bos(), 5};
  for (int32_t id : tok.encode("In the beginning", false)) want.push_back(id);
  want.push_back(6);
  for (int32_t id : tok.encode(" the earth.", false)) want.push_back(id);
  want.push_back(7);
  for (int32_t id : tok.encode(" God", false)) want.push_back(id);
  EXPECT_EQ(infill_tokens(tok, body), want);
  json spm = body;
  spm["spm_infill"] = true;
  EXPECT_EQ(infill_tokens(tok, spm)[1], 6);  // the suffix first
  json asked = body;
  asked["n_predict"] = 8;
  asked["temperature"] = 0;
  const json r = post("/infill", asked.dump(), 200);
  const json same = post("/completion", json{{"prompt", want}, {"n_predict", 8}, {"temperature", 0}}.dump(), 200);
  EXPECT_EQ(r["content"], same["content"]);
  EXPECT_EQ(r["tokens_evaluated"], static_cast<int64_t>(want.size()));
  const json extra = post("/infill", R"({"input_prefix": "a", "input_extra": [{"filename": "x", "text": "y"}]})", 400);
  EXPECT_EQ(extra["error"]["param"], "input_extra");
}

TEST_F(ServerOllama, EmbedGivesTheOpenAiEndpointsVectors) {
  const json openai = post("/v1/embeddings", R"({"input": ["In the beginning", "light"]})", 200);
  const json r = post("/api/embed", R"({"model": "tiny", "input": ["In the beginning", "light"]})", 200);
  EXPECT_EQ(r["model"], "tiny");
  ASSERT_EQ(r["embeddings"].size(), 2u);
  EXPECT_EQ(r["embeddings"][0], openai["data"][0]["embedding"]);
  EXPECT_EQ(r["embeddings"][1], openai["data"][1]["embedding"]);
  EXPECT_EQ(r["prompt_eval_count"], openai["usage"]["prompt_tokens"]);
  const json one = post("/api/embed", R"({"input": "light"})", 200);
  EXPECT_EQ(one["embeddings"][0], openai["data"][1]["embedding"]);
  const json legacy = post("/api/embeddings", R"({"model": "tiny", "prompt": "light"})", 200);
  EXPECT_EQ(legacy["embedding"], openai["data"][1]["embedding"]);
  EXPECT_EQ(post("/api/embed", R"({"input": [1, 2]})", 400),
            json({{"error", "'input' must be a string or a list of strings"}}));
  EXPECT_EQ(post("/api/embeddings", R"({"input": "x"})", 400), json({{"error", "'prompt' is required"}}));
}

}  // namespace
}  // namespace strata
