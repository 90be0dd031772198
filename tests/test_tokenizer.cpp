// Tokenizer behaviour that the reference comparison (tools/reference/check_tokenizers.py)
// does not cover: decoding, round trips, BOS handling, special tokens.
#include <gtest/gtest.h>

#include "core/error.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "model/pretokenize.h"
#include "model/tokenizer.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::data_file;

const char* kAwkward[] = {
    "Hello, world!",
    " leading space",
    "trailing space ",
    "two  spaces",
    "tabs\tand\nnewlines\n",
    "digits 0123456789 and 3.14",
    "naïve café",
    "日本語",
    "emoji 😀🎉",
    "mixed 日本 text",
    "\u00a0nbsp",
    "<0x41>",
    "don't",
    "   ",
    "a",
};

class TokenizerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerTest, DecodeOfEncodeRoundTrips) {
  const auto f = GgufFile::open(data_file(GetParam()));
  const auto tok = Tokenizer::from_gguf(*f);
  for (const char* s : kAwkward) {
    const auto ids = tok->encode(s, false);
    EXPECT_FALSE(ids.empty()) << s;
    EXPECT_EQ(tok->decode(ids), s) << GetParam();
  }
}

TEST_P(TokenizerTest, EmptyTextAndBos) {
  const auto f = GgufFile::open(data_file(GetParam()));
  const auto tok = Tokenizer::from_gguf(*f);
  EXPECT_TRUE(tok->encode("", false).empty());
  // BOS by llama.cpp's rule: these files have no add_bos_token key, so SentencePiece adds one
  // and byte-level BPE (a GPT-2 pre-tokenizer) none.
  const bool spm = std::string(tok->kind()).starts_with("llama");
  EXPECT_EQ(tok->add_bos_default(), spm) << tok->kind();
  EXPECT_FALSE(tok->add_eos_default());
  const auto with_bos = tok->encode("", true);
  ASSERT_EQ(with_bos.size(), spm ? 1u : 0u);
  if (spm) {
    EXPECT_EQ(with_bos[0], tok->bos());
  }
  const auto ids = tok->encode("hello", true);
  EXPECT_EQ(ids.front() == tok->bos(), spm);
  EXPECT_EQ(tok->decode(ids), "hello");  // control tokens decode to nothing
  EXPECT_TRUE(tok->is_control(tok->eos()));
}

// llama.cpp v0.5.0's defaults without tokenizer.ggml.add_bos_token (llama-vocab.cpp): SentencePiece
// adds BOS; byte-level BPE only for the Llama 3 family's and a few other pre-tokenizers.
TEST(TokenizerDefaults, BosIsAddedAsLlamaCppAddsIt) {
  EXPECT_TRUE(default_add_bos("llama", ""));
  EXPECT_TRUE(default_add_bos("gpt2", "llama-bpe"));
  EXPECT_TRUE(default_add_bos("gpt2", "llama3"));
  EXPECT_TRUE(default_add_bos("gpt2", "tekken"));
  EXPECT_TRUE(default_add_bos("gpt2", "gemma4"));
  EXPECT_TRUE(default_add_bos("gemma4", "gemma4"));
  EXPECT_FALSE(default_add_bos("gpt2", ""));
  EXPECT_FALSE(default_add_bos("gpt2", "qwen2"));
  EXPECT_FALSE(default_add_bos("gpt2", "falcon"));
  EXPECT_FALSE(default_add_bos("gpt2", "gpt-2"));
  EXPECT_FALSE(default_add_bos("test", ""));
  EXPECT_TRUE(forced_add_bos("gemma4"));
  EXPECT_FALSE(forced_add_bos("llama-bpe"));
}

// tokenizer.ggml.add_bos_token / add_eos_token override the defaults, as in llama.cpp; with
// add_special false neither is added.
TEST(TokenizerDefaults, TheFilesKeysDecideBosAndEos) {
  const auto f = GgufFile::open(data_file("spm-tokenizer.gguf"));
  const std::string path = strata::testing::temp_file("spm_eos.gguf");
  GgufWriter w(path);
  for (const auto& [key, value] : f->metadata()) w.set(key, value);
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  w.set("tokenizer.ggml.add_eos_token", GgufValue::boolean(true));
  w.finish();
  const auto tok = Tokenizer::from_gguf(*GgufFile::open(path));
  EXPECT_FALSE(tok->add_bos_default());
  EXPECT_TRUE(tok->add_eos_default());
  const auto ids = tok->encode("hello", /*add_special=*/true);
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), tok->bos());
  EXPECT_EQ(ids.back(), tok->eos());
  const auto plain = tok->encode("hello", /*add_special=*/false);
  EXPECT_EQ(plain.size() + 1, ids.size());
  EXPECT_NE(plain.back(), tok->eos());
}

INSTANTIATE_TEST_SUITE_P(Both, TokenizerTest,
                         ::testing::Values("spm-tokenizer.gguf", "gpt2-tokenizer.gguf"));

std::vector<std::string> pieces_of(Pretokenizer kind, std::string_view text) {
  std::vector<std::string> out;
  for (const auto& [offset, length] : pretokenize(kind, text))
    out.emplace_back(text.substr(offset, length));
  return out;
}

// The pre-tokenizers' split rules piece by piece (model/pretokenize.h); their agreement with
// Python's regex on thousands of strings is check_tokenizers.py's.
TEST(Pretokenizer, Gpt2AndFalconSplitAsTheirPatternsSay) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces_of(Pretokenizer::Gpt2, "Hello, world 12345 don't"),
            (V{"Hello", ",", " world", " 12345", " don", "'t"}));
  // Falcon: punctuation and $+<=>^~|` runs apart first, then GPT-2's pattern, then digit triples.
  EXPECT_EQ(pieces_of(Pretokenizer::Falcon, "Hello, world 12345 don't"),
            (V{"Hello", ",", " world", " ", "123", "45", " don", "'", "t"}));
  EXPECT_EQ(pieces_of(Pretokenizer::Falcon, "$1000+x==<3>"),
            (V{"$", "100", "0", "+", "x", "==<", "3", ">"}));
  // A whitespace run before a word keeps its last space for the word.
  EXPECT_EQ(pieces_of(Pretokenizer::Falcon, "a  \n\n b"), (V{"a", "  \n\n", " b"}));
  EXPECT_TRUE(pieces_of(Pretokenizer::Falcon, "").empty());
  EXPECT_EQ(pretokenizer_from_name("falcon")->kind, Pretokenizer::Falcon);
  EXPECT_EQ(pretokenizer_from_name("default")->kind, Pretokenizer::Gpt2);
  EXPECT_FALSE(pretokenizer_from_name("tekken"));
}

// Llama 3's and Qwen2's pattern (model/pretokenize.h); the expected pieces are Python regex's
// findall of the tokenizer.json patterns.
TEST(Pretokenizer, Llama3AndQwen2SplitAsTheirPatternsSay) {
  using V = std::vector<std::string>;
  // Contractions in either case; digits in threes (Qwen2: one by one); a space joins a word.
  EXPECT_EQ(pieces_of(Pretokenizer::Llama3, "Hello, world 12345 DON'T we'LL"),
            (V{"Hello", ",", " world", " ", "123", "45", " DON", "'T", " we", "'LL"}));
  EXPECT_EQ(pieces_of(Pretokenizer::Qwen2, "Hello, world 12345 DON'T we'LL"),
            (V{"Hello", ",", " world", " ", "1", "2", "3", "4", "5", " DON", "'T", " we", "'LL"}));
  // Any one non-letter but a line break starts a word; symbols take the line breaks after them;
  // whitespace ends at its last line break.
  const V code{"(x", ")=>{\n\n", " ", " return", " ", "1", ";\r\n", "}", "\t", "\tdone", "  "};
  EXPECT_EQ(pieces_of(Pretokenizer::Llama3, "(x)=>{\n\n  return 1;\r\n}\t\tdone  "), code);
  EXPECT_EQ(pieces_of(Pretokenizer::Qwen2, "(x)=>{\n\n  return 1;\r\n}\t\tdone  "), code);
  EXPECT_EQ(pieces_of(Pretokenizer::Llama3, "a  \n\n b"), (V{"a", "  \n\n", " b"}));
  EXPECT_EQ(pieces_of(Pretokenizer::Llama3, "\n\nx \n"), (V{"\n\n", "x", " \n"}));
  EXPECT_TRUE(pieces_of(Pretokenizer::Qwen2, "").empty());
  // The names llama.cpp writes, and Llama 3's whole-piece rule.
  EXPECT_EQ(pretokenizer_from_name("llama-bpe")->kind, Pretokenizer::Llama3);
  EXPECT_TRUE(pretokenizer_from_name("llama-bpe")->ignore_merges);
  EXPECT_EQ(pretokenizer_from_name("smaug-bpe")->kind, Pretokenizer::Llama3);
  EXPECT_FALSE(pretokenizer_from_name("smaug-bpe")->ignore_merges);
  EXPECT_EQ(pretokenizer_from_name("qwen2")->kind, Pretokenizer::Qwen2);
  EXPECT_FALSE(pretokenizer_from_name("qwen2")->ignore_merges);
  EXPECT_EQ(pretokenizer_from_name("deepseek-r1-qwen")->kind, Pretokenizer::Qwen2);
}

// StarCoder, Refact, Command-R: every digit alone first, then GPT-2's pattern between them.
// Qwen3.5: Qwen2's pattern whose letter runs take combining marks (\p{M}), so a word with
// accents written as marks stays one piece.
TEST(Pretokenizer, DigitsFirstAndQwen35SplitAsTheirPatternsSay) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces_of(Pretokenizer::DigitsGpt2, "abc123 def 4x"),
            (V{"abc", "1", "2", "3", " def", " ", "4", "x"}));
  EXPECT_EQ(pieces_of(Pretokenizer::Gpt2, "abc123 def 4x"), (V{"abc", "123", " def", " 4", "x"}));
  EXPECT_TRUE(pieces_of(Pretokenizer::DigitsGpt2, "").empty());
  const std::string cafe = "cafe\xcc\x81s, 12";  // "cafés" with U+0301 COMBINING ACUTE
  EXPECT_EQ(pieces_of(Pretokenizer::Qwen35, cafe), (V{"cafe\xcc\x81s", ",", " ", "1", "2"}));
  // Qwen2's: the mark is the optional non-letter in front of the next letters.
  EXPECT_EQ(pieces_of(Pretokenizer::Qwen2, cafe), (V{"cafe", "\xcc\x81s", ",", " ", "1", "2"}));
  for (const char* name : {"starcoder", "refact", "command-r"})
    EXPECT_EQ(pretokenizer_from_name(name)->kind, Pretokenizer::DigitsGpt2) << name;
  EXPECT_EQ(pretokenizer_from_name("mpt")->kind, Pretokenizer::Gpt2);
  EXPECT_EQ(pretokenizer_from_name("qwen35")->kind, Pretokenizer::Qwen35);
}

// DeepSeek's regexes in sequence, each splitting the pieces of the ones before (the expected
// pieces are Python's regex running the same expressions in the same way).
TEST(Pretokenizer, DeepseekSplitsRunTheirRegexesInSequence) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces_of(Pretokenizer::DeepseekCoder, "Hello, \u4e16\u754c 123\n  x!!"),
            (V{"Hello", ",", " ", "\u4e16\u754c", " ", "1", "2", "3", "\n", " ", " x", "!!"}));
  EXPECT_EQ(pieces_of(Pretokenizer::DeepseekLlm, "Hello, \u4e16\u754c 123\n  x!!  "),
            (V{"Hello", ",", " ", "\u4e16\u754c", " ", "123", "\n", " ", " x", "!!", "  "}));
  EXPECT_TRUE(pieces_of(Pretokenizer::DeepseekLlm, "").empty());
  EXPECT_EQ(pretokenizer_from_name("deepseek-coder")->kind, Pretokenizer::DeepseekCoder);
  EXPECT_EQ(pretokenizer_from_name("deepseek-llm")->kind, Pretokenizer::DeepseekLlm);
}

// User-defined tokens (Hugging Face's added tokens, GPT-NeoX's runs of spaces) are taken whole
// before the split whether special tokens are parsed or not; control tokens only when they are.
TEST(BpeTokenizer, UserDefinedTokensAreTakenWholeControlTokensOnlyWhenParsed) {
  const auto f = GgufFile::open(data_file("gpt2-tokenizer.gguf"));
  const auto plain = Tokenizer::from_gguf(*f);
  const auto one = [&](const char* text) {
    const auto ids = plain->encode(text, false);
    EXPECT_EQ(ids.size(), 1u) << text;
    return ids.front();
  };
  // The same vocabulary with the token "x" marked user-defined and "y" control.
  const int32_t x = one("x"), y = one("y");
  const std::string path = strata::testing::temp_file("gpt2_user_defined.gguf");
  GgufWriter w(path);
  for (const auto& [key, value] : f->metadata()) w.set(key, value);
  std::vector<GgufValue> types;
  for (int32_t id = 0; id < plain->n_vocab(); ++id)
    types.push_back(GgufValue::i32(id == x ? 4 : id == y ? 3 : 1));
  w.set("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, types));
  w.finish();
  const auto tok = Tokenizer::from_gguf(*GgufFile::open(path));
  const auto concat = [&](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> all;
    for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  };
  // "x" is cut out of the word before the split, parsed or not.
  EXPECT_EQ(tok->encode("wax", false), concat({plain->encode("wa", false), {x}}));
  EXPECT_EQ(tok->encode("wax", false, true), concat({plain->encode("wa", false), {x}}));
  // "y" only when special tokens are parsed.
  EXPECT_EQ(tok->encode("way", false), plain->encode("way", false));
  EXPECT_EQ(tok->encode("way", false, true), concat({plain->encode("wa", false), {y}}));
}

// Gemma 4 (llama.cpp's "gemma4" model): spaces as U+2581, merges by rank over UTF-8 characters
// with no word split, a run of line breaks taken whole, byte tokens for what is left; BOS always.
TEST(Gemma4Tokenizer, MergesByRankOverCharactersWithByteFallback) {
  const std::string path = strata::testing::temp_file("gemma4_tiny.gguf");
  {
    GgufWriter w(path);
    const std::vector<std::pair<std::string, int32_t>> vocab = {{"<unk>", 2},
                                                                {"<bos>", 3},
                                                                {"<0x78>", 6},
                                                                {"a", 1},
                                                                {"b", 1},
                                                                {"ab", 1},
                                                                {"\xe2\x96\x81", 1},
                                                                {"\xe2\x96\x81"
                                                                 "ab",
                                                                 1},
                                                                {"\n", 1},
                                                                {"\n\n", 1}};
    std::vector<GgufValue> tokens, types;
    for (const auto& [text, type] : vocab) {
      tokens.push_back(GgufValue::str(text));
      types.push_back(GgufValue::i32(type));
    }
    w.set("tokenizer.ggml.model", GgufValue::str("gemma4"));
    w.set("tokenizer.ggml.pre", GgufValue::str("gemma4"));
    w.set("tokenizer.ggml.tokens", GgufValue::array(GgufType::String, tokens));
    w.set("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, types));
    w.set("tokenizer.ggml.merges",
          GgufValue::array(GgufType::String,
                           {GgufValue::str("a b"), GgufValue::str("\xe2\x96\x81 ab")}));
    w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
    w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));  // Gemma 4 adds it anyway
    w.finish();
  }
  const auto tok = Tokenizer::from_gguf(*GgufFile::open(path));
  EXPECT_TRUE(tok->add_bos_default());
  const auto ids = tok->encode("ab ab\n\nx", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 7, 9, 2}));
  EXPECT_EQ(tok->decode(ids), "ab ab\n\nx");
  EXPECT_EQ(tok->encode("ab", true), (std::vector<int32_t>{1, 5}));
}

// BERT's WordPiece ("bert"): lowercase, accents stripped (NFD), punctuation and CJK ideographs
// their own words, the longest vocabulary entries first (word starts with U+2581), a word with a
// piece outside the vocabulary the unknown token; [CLS] and [SEP] around it with add_special.
TEST(WordPieceTokenizer, LongestPiecesOfNormalizedWords) {
  const std::string path = strata::testing::temp_file("bert_tiny.gguf");
  const std::string sp = "\xe2\x96\x81";
  {
    GgufWriter w(path);
    const std::vector<std::pair<std::string, int32_t>> vocab = {{"[PAD]", 3},
                                                                {"[UNK]", 3},
                                                                {"[CLS]", 3},
                                                                {"[SEP]", 3},
                                                                {sp + "hello", 1},
                                                                {sp + "he", 1},
                                                                {"llo", 1},
                                                                {sp + "world", 1},
                                                                {sp + "!", 1},
                                                                {sp + "apfel", 1},
                                                                {sp + "\xe4\xb8\xad", 1},
                                                                {sp + "x", 1}};
    std::vector<GgufValue> tokens, types;
    for (const auto& [text, type] : vocab) {
      tokens.push_back(GgufValue::str(text));
      types.push_back(GgufValue::i32(type));
    }
    w.set("tokenizer.ggml.model", GgufValue::str("bert"));
    w.set("tokenizer.ggml.tokens", GgufValue::array(GgufType::String, tokens));
    w.set("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, types));
    w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(1));
    w.set("tokenizer.ggml.cls_token_id", GgufValue::u32(2));
    w.set("tokenizer.ggml.seperator_token_id", GgufValue::u32(3));
    w.finish();
  }
  const auto tok = Tokenizer::from_gguf(*GgufFile::open(path));
  EXPECT_EQ(tok->encode("Hello  WORLD!", false), (std::vector<int32_t>{4, 7, 8}));
  // "hexllo" has no piece for "xllo": the whole word is [UNK]; "\xc3\x84pfel" is "apfel".
  EXPECT_EQ(tok->encode("hexllo \xc3\x84pfel", false), (std::vector<int32_t>{1, 9}));
  EXPECT_EQ(tok->encode("x\xe4\xb8\xadx", false), (std::vector<int32_t>{11, 10, 11}));
  EXPECT_EQ(tok->encode("hello", true), (std::vector<int32_t>{2, 4, 3}));
  EXPECT_EQ(tok->decode(tok->encode("hello world", false)), " hello world");
}

TEST(SpmTokenizer, UsesByteFallbackForUnseenCharacters) {
  const auto f = GgufFile::open(data_file("spm-tokenizer.gguf"));
  const auto tok = Tokenizer::from_gguf(*f);
  const auto ids = tok->encode("😀", false);
  // "▁" then the four UTF-8 bytes of the emoji as <0xF0> <0x9F> <0x98> <0x80>.
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(tok->token_text(ids[1]), "<0xF0>");
  EXPECT_EQ(tok->token_text(ids[4]), "<0x80>");
}

TEST(SpmTokenizer, MergesCommonWords) {
  const auto f = GgufFile::open(data_file("spm-tokenizer.gguf"));
  const auto tok = Tokenizer::from_gguf(*f);
  const auto ids = tok->encode("And God said", false);
  ASSERT_EQ(ids.size(), 3u);  // each word is a piece of the trained vocabulary
  EXPECT_EQ(tok->token_text(ids[0]),
            "\xe2\x96\x81"
            "And");
}

// A copy of the SentencePiece test vocabulary whose byte token <0x41> is written as `text`.
std::string spm_with_byte_token(const std::string& text, const std::string& name) {
  const auto f = GgufFile::open(data_file("spm-tokenizer.gguf"));
  const std::string path = strata::testing::temp_file(name);
  GgufWriter w(path);
  for (const auto& [key, value] : f->metadata()) {
    GgufValue v = value;
    if (key == "tokenizer.ggml.tokens")
      for (auto& t : v.items)
        if (t.as_string(key) == "<0x41>") t = GgufValue::str(text);
    w.set(key, v);
  }
  w.finish();
  return path;
}

// A byte token's text indexes the 256-entry byte table: "<0x-6>" wrote before it (segfault),
// "<0xZZ>" threw std::invalid_argument out of the loader. Both are one-line errors now.
TEST(SpmTokenizer, RefusesByteTokensThatAreNotTwoHexDigits) {
  for (const char* bad : {"<0x-6>", "<0xZZ>", "<0x+1>", "<0x 1>", "<0x4>", "<0x411>", "<1x41>"}) {
    const auto f = GgufFile::open(spm_with_byte_token(bad, "bad_byte_token.gguf"));
    try {
      Tokenizer::from_gguf(*f);
      ADD_FAILURE() << "accepted byte token " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not <0xHH>"), std::string::npos) << e.what();
    }
  }
  const auto good = GgufFile::open(spm_with_byte_token("<0x41>", "good_byte_token.gguf"));
  const auto tok = Tokenizer::from_gguf(*good);
  EXPECT_EQ(tok->decode(tok->encode("\x01", false)), "\x01");  // byte fallback still works
}

}  // namespace
}  // namespace strata
