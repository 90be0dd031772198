// The pure half of `strata pull`: user/repo[:quant] read, the host's tree read, the GGUF file
// chosen by its quantization as llama.cpp's -hf chooses, the cache's names.
// tools/reference/check_pull.py downloads from a local host (cuts, resume, SHA-256).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "offline/model_pull.h"

namespace strata {
namespace {

std::string pull_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<HubFile> files(std::initializer_list<const char*> names) {
  std::vector<HubFile> out;
  for (const char* n : names) out.push_back({n, 100, ""});
  return out;
}

TEST(ModelPull, SpecsAreUserRepoAndAnOptionalQuant) {
  const PullSpec a = parse_pull_spec("bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M");
  EXPECT_EQ(a.repo, "bartowski/Llama-3.2-1B-Instruct-GGUF");
  EXPECT_EQ(a.tag, "Q4_K_M");
  EXPECT_EQ(parse_pull_spec("u/r").tag, "");
  for (const char* bad : {"repo", "u/r/x", "/r", "u/", "u/r:", "u/r:a:b", "u r/x", "u/r:Q4 K"})
    EXPECT_NE(pull_error([&] { parse_pull_spec(bad); }).find("is not user/repo[:quant]"), std::string::npos) << bad;
}

TEST(ModelPull, TheTreeGivesSizesAndHashesOfLfsFiles) {
  const auto tree = nlohmann::json::parse(R"([
      {"type": "directory", "path": "sub"},
      {"type": "file", "path": "README.md", "size": 12},
      {"type": "file", "path": "sub/m-Q4_0.gguf", "size": 134,
       "lfs": {"oid": "abc", "size": 5000000000, "pointerSize": 134}}])");
  const auto f = parse_hub_tree(tree);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].size, 12u);
  EXPECT_EQ(f[0].sha256, "");
  EXPECT_EQ(f[1].path, "sub/m-Q4_0.gguf");
  EXPECT_EQ(f[1].size, 5000000000u);
  EXPECT_EQ(f[1].sha256, "abc");
}

TEST(ModelPull, TheFileIsChosenByItsQuantizationAsLlamaCppDoes) {
  const auto repo = files({"README.md", "m-Q4_K_M.gguf", "m-Q4_K_M_L.gguf", "m.Q8_0.gguf", "mmproj-m-Q8_0.gguf",
                           "m-F16.gguf"});
  EXPECT_EQ(choose_gguf(repo, "q8_0").path, "m.Q8_0.gguf");  // any case; never the projector
  EXPECT_EQ(choose_gguf(repo, "Q4_K_M").path, "m-Q4_K_M.gguf");
  EXPECT_EQ(choose_gguf(repo, "").path, "m-Q4_K_M.gguf");      // the default
  EXPECT_EQ(choose_gguf(files({"only-F16.gguf"}), "").path, "only-F16.gguf");
  EXPECT_EQ(pull_error([&] { choose_gguf(repo, "IQ2_XS"); }),
            "no GGUF file of the repository is 'IQ2_XS' (its GGUF files: m-Q4_K_M.gguf, m-Q4_K_M_L.gguf, "
            "m.Q8_0.gguf, m-F16.gguf); name one with user/repo:QUANT");
  EXPECT_EQ(pull_error([&] { choose_gguf(files({"a-F16.gguf", "b-Q8_0.gguf"}), ""); }),
            "no GGUF file of the repository is Q4_K_M, the default, and it has several (its GGUF files: "
            "a-F16.gguf, b-Q8_0.gguf); name one with user/repo:QUANT");
  EXPECT_EQ(pull_error([&] { choose_gguf(files({"README.md"}), ""); }),
            "the repository has no GGUF file (its files: README.md)");
  EXPECT_EQ(pull_error([&] { choose_gguf(files({"big-Q4_0-00001-of-00002.gguf", "big-Q4_0-00002-of-00002.gguf"}), "Q4_0"); }),
            "'big-Q4_0-00001-of-00002.gguf' is split into parts; strata reads one-file GGUF models "
            "(llama-gguf-split --merge joins them)");
  EXPECT_EQ(pull_error([&] { choose_gguf(files({"a/m-Q4_0.gguf", "b/m-Q4_0.gguf"}), "Q4_0"); }),
            "several GGUF files are 'Q4_0': m-Q4_0.gguf, m-Q4_0.gguf; fetch the one you want and pass -m FILE");
}

TEST(ModelPull, CachedFilesAreNamedByRepositoryAndFile) {
  EXPECT_EQ(pulled_path("/c", "user/repo", "sub/m-Q4_0.gguf"), "/c/user_repo_sub_m-Q4_0.gguf");
}

}  // namespace
}  // namespace strata
