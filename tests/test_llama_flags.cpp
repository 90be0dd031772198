// llama.cpp's command-line spellings (cli/llama_flags.h) and prompt escapes (cli/prompt_escapes.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/llama_flags.h"
#include "cli/prompt_escapes.h"
#include "core/error.h"

namespace strata {
namespace {

using Args = std::vector<std::string>;

// A command whose long options are `names`.
auto options(std::vector<std::string> names) {
  return [names](std::string_view n) {
    for (const auto& x : names)
      if (x == n) return true;
    return false;
  };
}

std::string refusal(const Args& args, std::vector<std::string> names = {}) {
  try {
    with_strata_spellings(args, options(names));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LlamaFlags, SeveralLettersAfterOneDashBecomeStrataOptions) {
  const auto serve = options({"--parallel", "--cache-type-k", "--n-gpu-layers", "--system"});
  EXPECT_EQ(with_strata_spellings({"serve", "-np", "4", "-ctk", "q8_0", "-ngl", "99"}, serve),
            (Args{"serve", "--parallel", "4", "--cache-type-k", "q8_0", "--n-gpu-layers", "99"}));
  EXPECT_EQ(with_strata_spellings({"chat", "-sys", "be brief"}, serve),
            (Args{"chat", "--system", "be brief"}));
  // -hf pulls where a model is loaded; a command without the option names where.
  EXPECT_EQ(with_strata_spellings({"run", "-hf", "u/r:Q4_0"}, options({"--hf-repo"})),
            (Args{"run", "--hf-repo", "u/r:Q4_0"}));
  EXPECT_NE(refusal({"bench", "-hf", "u/r"}).find("pulled where a model is loaded"), std::string::npos);
  // What strata does anyway is dropped, with llama.cpp's value.
  EXPECT_EQ(with_strata_spellings({"run", "-fa", "on", "--no-mmap", "-no-cnv", "-p", "x"}, serve),
            (Args{"run", "-p", "x"}));
  EXPECT_EQ(with_strata_spellings({"run", "-fa", "-p", "x"}, serve), (Args{"run", "-p", "x"}));
  // The subcommand's name and values after "--" are never flags.
  EXPECT_EQ(with_strata_spellings({"run", "-p", "x", "--", "-hf"}, serve),
            (Args{"run", "-p", "x", "--", "-hf"}));
}

TEST(LlamaFlags, WhatStrataLacksIsRefusedNamingWhatToUse) {
  EXPECT_NE(refusal({"run", "-sys", "x"}).find("strata chat --system"), std::string::npos);
  EXPECT_NE(refusal({"chat", "-np", "2"}).find("strata serve --parallel"), std::string::npos);
  EXPECT_NE(refusal({"run", "-hff", "m.gguf"}).find("-hf user/repo:QUANT"), std::string::npos);
  EXPECT_NE(refusal({"run", "-cnv"}).find("strata chat"), std::string::npos);
  EXPECT_NE(refusal({"perplexity", "-md", "d.gguf"}).find("where text is generated"),
            std::string::npos);
  EXPECT_EQ(with_strata_spellings({"run", "-md", "d.gguf", "-ngld", "9", "-td", "1"},
                                  options({"--model-draft", "--gpu-layers-draft", "--threads-draft"})),
            (Args{"run", "--model-draft", "d.gguf", "--gpu-layers-draft", "9", "--threads-draft", "1"}));
  EXPECT_NE(refusal({"run", "-ot", "x=CPU"}).find("--vram-budget"), std::string::npos);
  EXPECT_NE(refusal({"run", "--mlock"}).find("does not lock"), std::string::npos);
  EXPECT_NE(refusal({"run", "-fa", "off"}).find("cannot be turned off"), std::string::npos);
  EXPECT_EQ(refusal({"run", "-p", "hi", "-n", "4"}), "");
  // A flag only some commands have: refused where it is not, naming the one that has it.
  const std::string shift = refusal({"serve", "--context-shift"});
  EXPECT_NE(shift.find("strata run --context-shift"), std::string::npos) << shift;
  EXPECT_EQ(shift.find("strata's"), std::string::npos) << shift;
  const auto run = options({"--context-shift", "--keep"});
  EXPECT_EQ(with_strata_spellings({"run", "--context-shift", "--keep", "4"}, run),
            (Args{"run", "--context-shift", "--keep", "4"}));
}

TEST(LlamaFlags, MisspelledFlagsGetTheClosestName) {
  const std::vector<std::string> names = {"--temp", "--top-k", "--top-p", "--min-p", "--threads",
                                          "--ctx-size", "-c", "--n-predict"};
  EXPECT_EQ(closest_flag("--top_k", names), "--top-k");
  EXPECT_EQ(closest_flag("--temprature", names), "--temp");
  EXPECT_EQ(closest_flag("--temperature", names), "--temp");
  EXPECT_EQ(closest_flag("--thread", names), "--threads");
  EXPECT_EQ(closest_flag("--ctx=4096", names), "--ctx-size");
  EXPECT_EQ(closest_flag("--bogus", names), "");
  EXPECT_EQ(closest_flag("--zzzzzzzzzz", names), "");
}

TEST(PromptEscapes, AsLlamaCppProcessesThem) {
  EXPECT_EQ(process_escapes(R"(a\nb\tc\\d\"e\'f)"), "a\nb\tc\\d\"e'f");
  EXPECT_EQ(process_escapes(R"(\x41\x4a)"), "AJ");
  EXPECT_EQ(process_escapes(R"(\x4)"), R"(\x4)");  // too short: as typed
  EXPECT_EQ(process_escapes(R"(\q \)"), R"(\q \)");
  EXPECT_EQ(process_escapes("plain"), "plain");
}

}  // namespace
}  // namespace strata
