// /v1/embeddings: base64 as RFC 4648 writes it, the request's shapes and refusals, and the
// endpoint on the shipped model (vectors equal to the scheduler's, more inputs than slots and
// than the queue holds, errors naming the field). tools/reference/check_embeddings.py checks
// the values against the PyTorch reference.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <httplib.h>

#include <cmath>
#include <cstring>

#include "core/base64.h"
#include "server/embeddings_api.h"
#include "server/openai_api.h"
#include "server_fixture.h"

namespace strata {
namespace {

using nlohmann::json;
using strata::testing::ServerHttp;

std::string b64(std::string_view s) {
  return base64_encode({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

TEST(Base64, Rfc4648TestVectors) {
  EXPECT_EQ(b64(""), "");
  EXPECT_EQ(b64("f"), "Zg==");
  EXPECT_EQ(b64("fo"), "Zm8=");
  EXPECT_EQ(b64("foo"), "Zm9v");
  EXPECT_EQ(b64("foob"), "Zm9vYg==");
  EXPECT_EQ(b64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(b64("foobar"), "Zm9vYmFy");
  const uint8_t high[] = {0xff, 0xfe, 0xfd};
  EXPECT_EQ(base64_encode(high), "//79");
}

TEST(EmbeddingsApi, InputShapesAndRefusals) {
  auto parse = [](const char* body) { return parse_embedding_request(json::parse(body), 8, 100); };
  EXPECT_EQ(parse(R"({"input": "a b"})").inputs.at(0).text, "a b");
  auto r = parse(R"({"input": ["x", [1, 2], "y"], "encoding_format": "base64", "dimensions": 8,
                     "model": "m", "user": "u"})");
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_EQ(r.inputs[1].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.inputs[2].text, "y");
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(parse(R"({"input": [5, 6, 7]})").inputs.at(0).ids, (std::vector<int32_t>{5, 6, 7}));
  const std::pair<const char*, const char*> refused[] = {
      {R"({})", "input"},
      {R"({"input": ""})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": [[]]})", "input"},
      {R"({"input": [1, "a"]})", "input"},
      {R"({"input": [100]})", "input"},
      {R"({"input": [-1]})", "input"},
      {R"({"input": [1.5]})", "input"},
      {R"({"input": 3})", "input"},
      {R"({"input": [{"a": 1}]})", "input"},
      {R"({"input": "a", "encoding_format": "int8"})", "encoding_format"},
      {R"({"input": "a", "dimensions": 4})", "dimensions"},
      {R"({"input": "a", "model": 3})", "model"},
      {R"([1])", ""}};
  for (const auto& [body, param] : refused) {
    try {
      parse(body);
      ADD_FAILURE() << body << " was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << body;
      EXPECT_EQ(e.param, param) << body << ": " << e.what();
    }
  }
  std::string many = R"({"input": [)";
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many += i ? ",\"a\"" : "\"a\"";
  EXPECT_THROW(parse((many + "]}").c_str()), ApiError);
}

TEST(EmbeddingsApi, ResponseInOpenAisShape) {
  const std::vector<std::vector<float>> v = {{1.0f, -2.5f}, {0.0f, 0.5f}};
  const json r = embedding_response(v, false, "tiny", 7);
  EXPECT_EQ(r["object"], "list");
  EXPECT_EQ(r["model"], "tiny");
  EXPECT_EQ(r["usage"], json({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  EXPECT_EQ(r["data"][1]["index"], 1);
  EXPECT_EQ(r["data"][1]["object"], "embedding");
  EXPECT_EQ(r["data"][0]["embedding"], json({1.0, -2.5}));
  const json b = embedding_response(v, true, "tiny", 7);
  const float f[2] = {1.0f, -2.5f};
  EXPECT_EQ(b["data"][0]["embedding"], base64_encode({reinterpret_cast<const uint8_t*>(f), 8}));
}

class ServerEmbeddings : public ServerHttp {
 protected:
  void SetUp() override {
    slots_ = 2;
    start([](ServerOptions& o) {
      o.max_body_bytes = 1 << 16;
      o.scheduler.max_queue = 1;  // fewer than the inputs: a request's inputs take turns
    });
  }
};

double length(const json& v) {
  double s = 0;
  for (const json& x : v) s += x.get<double>() * x.get<double>();
  return std::sqrt(s);
}

TEST_F(ServerEmbeddings, VectorsOfUnitLengthInInputOrderWhateverTheSlots) {
  json inputs = json::array();
  for (int i = 0; i < 7; ++i) inputs.push_back(fmt::format("And God said {}", i));
  const json r = post("/v1/embeddings", json({{"input", inputs}}).dump(), 200);
  ASSERT_EQ(r["data"].size(), 7u);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(r["data"][i]["index"], i);
    ASSERT_EQ(r["data"][i]["embedding"].size(), static_cast<size_t>(model_->config.n_embd));
    EXPECT_NEAR(length(r["data"][i]["embedding"]), 1.0, 1e-5);
    // Each one as it is asked alone (the default mean pooling reuses nothing cached).
    const json alone = post("/embeddings", json({{"input", inputs[i]}}).dump(), 200);
    EXPECT_EQ(alone["data"][0]["embedding"], r["data"][i]["embedding"]) << i;
  }
  EXPECT_NE(r["data"][0]["embedding"], r["data"][1]["embedding"]);
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 7 * 3);
}

TEST_F(ServerEmbeddings, ErrorsNameTheField) {
  json e = post("/v1/embeddings", R"({"input": "a", "dimensions": 3})", 400);
  EXPECT_EQ(e["error"]["param"], "dimensions");
  std::string longer;
  for (int i = 0; i < 100; ++i) longer += "And God said ";
  e = post("/v1/embeddings", json({{"input", {"a", longer}}}).dump(), 400);
  EXPECT_EQ(e["error"]["param"], "input");
  EXPECT_EQ(e["error"]["code"], "context_length_exceeded");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("input 1"), std::string::npos);
  e = post("/v1/embeddings", R"({"input": [[1, 2], [100000]]})", 400);
  EXPECT_EQ(e["error"]["param"], "input");
  client_->set_bearer_token_auth("wrong");
  const auto res = client_->Post("/v1/embeddings", R"({"input": "a"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
}

// The chat page (GET /): served without the key (it has no secrets and asks for the key), with
// a policy that lets it talk only to this server, and naming no other address in its text.
TEST_F(ServerEmbeddings, ChatPageIsServedWithoutTheKeyAndNamesNoOtherAddress) {
  httplib::Client anonymous("127.0.0.1", port_);
  for (const char* path : {"/", "/index.html"}) {
    const auto res = anonymous.Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/html; charset=utf-8");
    const std::string policy = res->get_header_value("Content-Security-Policy");
    EXPECT_NE(policy.find("default-src 'none'"), std::string::npos) << policy;
    EXPECT_NE(policy.find("connect-src 'self'"), std::string::npos) << policy;
    EXPECT_NE(res->body.find("/v1/chat/completions"), std::string::npos);
    EXPECT_EQ(res->body.find("http://"), std::string::npos) << "the page names another address";
    EXPECT_EQ(res->body.find("https://"), std::string::npos) << "the page names another address";
  }
  const auto props = anonymous.Get("/props");
  ASSERT_TRUE(props);
  EXPECT_EQ(props->status, 401) << "only the page is open";
}

}  // namespace
}  // namespace strata
