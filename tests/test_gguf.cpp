// GGUF reader/writer: round trips of every value type, and every kind of corrupt file giving
// a clear Error (never a crash): truncation at every byte, bad magic, absurd counts, offsets
// past the end, unknown types.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "format/file_type.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"

namespace strata {
namespace {

std::string temp_path(const std::string& name) {
  return std::string(::testing::TempDir()) + "strata_gguf_" + std::to_string(::getpid()) + "_" +
         name;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// A small valid file: every metadata type, one F32 and one Q8_0 tensor.
std::string write_sample(const std::string& name) {
  const std::string path = temp_path(name);
  GgufWriter w(path);
  w.set("general.architecture", GgufValue::str("llama"));
  w.set("t.u8", {GgufType::U8, uint64_t{200}, {}, {}});
  w.set("t.i8", {GgufType::I8, int64_t{-100}, {}, {}});
  w.set("t.u16", {GgufType::U16, uint64_t{60000}, {}, {}});
  w.set("t.i16", {GgufType::I16, int64_t{-30000}, {}, {}});
  w.set("t.u32", GgufValue::u32(4000000000u));
  w.set("t.i32", GgufValue::i32(-2000000000));
  w.set("t.u64", GgufValue::u64(uint64_t{1} << 60));
  w.set("t.i64", {GgufType::I64, int64_t{-(int64_t{1} << 60)}, {}, {}});
  w.set("t.f32", GgufValue::f32(1.5f));
  w.set("t.f64", {GgufType::F64, 2.25, {}, {}});
  w.set("t.bool", GgufValue::boolean(true));
  w.set("t.str", GgufValue::str("héllo"));
  w.set("t.arr", GgufValue::array(GgufType::I32, {GgufValue::i32(1), GgufValue::i32(-2)}));
  w.set("t.nested", GgufValue::array(GgufType::Array,
                                     {GgufValue::array(GgufType::String, {GgufValue::str("a")})}));
  w.add_tensor("a", DType::F32, {4, 2});
  w.add_tensor("b", DType::Q8_0, {32});
  std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8};
  w.write_tensor_data({reinterpret_cast<const uint8_t*>(a.data()), a.size() * 4});
  std::vector<uint8_t> b(34, 7);
  w.write_tensor_data(b);
  w.finish();
  return path;
}

void expect_error(const std::string& path, const std::string& needle) {
  try {
    GgufFile::open(path);
    FAIL() << "no error for " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "message must be one line";
  }
}

TEST(Gguf, RoundTripsEveryValueType) {
  const auto f = GgufFile::open(write_sample("roundtrip.gguf"));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_FALSE(f->is_powerinfer());
  EXPECT_EQ(f->get_int("t.u8"), 200);
  EXPECT_EQ(f->get_int("t.i8"), -100);
  EXPECT_EQ(f->get_int("t.u16"), 60000);
  EXPECT_EQ(f->get_int("t.i16"), -30000);
  EXPECT_EQ(f->get_int("t.u32"), 4000000000LL);
  EXPECT_EQ(f->get_int("t.i32"), -2000000000);
  EXPECT_EQ(f->get_int("t.u64"), int64_t{1} << 60);
  EXPECT_EQ(f->get_int("t.i64"), -(int64_t{1} << 60));
  EXPECT_EQ(f->get_float("t.f32", 0), 1.5);
  EXPECT_EQ(f->get_float("t.f64", 0), 2.25);
  EXPECT_TRUE(f->get("t.bool").as_bool("t.bool"));
  EXPECT_EQ(f->get_string("t.str", ""), "héllo");
  const auto& arr = f->get("t.arr");
  ASSERT_EQ(arr.items.size(), 2u);
  EXPECT_EQ(arr.items[1].as_int("x"), -2);
  EXPECT_EQ(f->get("t.nested").items[0].items[0].as_string("x"), "a");
  ASSERT_EQ(f->tensors().size(), 2u);
  const auto* a = f->find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dims, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(a->rows(), 2);
  float v[8];
  std::memcpy(v, a->data, 32);
  EXPECT_EQ(v[7], 8.0f);
  const auto* b = f->find_tensor("b");
  EXPECT_EQ(b->type, DType::Q8_0);
  EXPECT_EQ(b->n_bytes, 34u);
  EXPECT_EQ(b->offset % 32, 0u);
  EXPECT_EQ(b->data[0], 7);
}

TEST(Gguf, TypeMismatchNamesTheKey) {
  const auto f = GgufFile::open(write_sample("mismatch.gguf"));
  try {
    f->get_int("t.str");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.str"), std::string::npos);
  }
  EXPECT_THROW(f->get("no.such.key"), Error);
}

TEST(Gguf, ReadsVersion2AndPowerInferMagic) {
  auto bytes = read_all(write_sample("v2src.gguf"));
  bytes[4] = 2;  // version 2 has the same little-endian layout
  write_all(temp_path("v2.gguf"), bytes);
  EXPECT_EQ(GgufFile::open(temp_path("v2.gguf"))->version(), 2u);
  std::memcpy(bytes.data(), "PWRI", 4);
  bytes[4] = 3;
  write_all(temp_path("pwri.gguf"), bytes);
  EXPECT_TRUE(GgufFile::open(temp_path("pwri.gguf"))->is_powerinfer());
  bytes[4] = 1;
  write_all(temp_path("v1.gguf"), bytes);
  expect_error(temp_path("v1.gguf"), "version 1");
}

// Where the last tensor's data ends: the writer pads the file to the alignment after it (as
// llama.cpp's reader needs), padding a reader may do without.
size_t data_end(const std::string& path) {
  const auto f = GgufFile::open(path);
  const GgufTensorInfo& last = f->tensors().back();
  return static_cast<size_t>(f->data_offset() + last.offset + last.n_bytes);
}

TEST(Gguf, EveryTruncationIsAnError) {
  const std::string src = write_sample("trunc-src.gguf");
  const auto bytes = read_all(src);
  const std::string path = temp_path("trunc.gguf");
  EXPECT_EQ(bytes.size() % 32, 0u) << "the file is padded to its alignment";
  for (size_t n = 0; n < data_end(src); ++n) {
    write_all(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(n)));
    EXPECT_THROW(GgufFile::open(path), Error) << "truncated to " << n << " bytes";
  }
}

TEST(Gguf, WrongMagic) {
  auto bytes = read_all(write_sample("magic-src.gguf"));
  std::memcpy(bytes.data(), "GGML", 4);
  write_all(temp_path("magic.gguf"), bytes);
  expect_error(temp_path("magic.gguf"), "not a GGUF file");
}

// Offsets of header fields in the sample: magic(4) version(4) n_tensors(8) n_kv(8).
TEST(Gguf, AbsurdCounts) {
  auto bytes = read_all(write_sample("counts-src.gguf"));
  auto patched = bytes;
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(patched.data() + 8, &huge, 8);
  write_all(temp_path("ntensors.gguf"), patched);
  expect_error(temp_path("ntensors.gguf"), "claims");
  patched = bytes;
  std::memcpy(patched.data() + 16, &huge, 8);
  write_all(temp_path("nkv.gguf"), patched);
  expect_error(temp_path("nkv.gguf"), "claims");
  // The first key's length (right after the header) set absurdly large.
  patched = bytes;
  std::memcpy(patched.data() + 24, &huge, 8);
  write_all(temp_path("strlen.gguf"), patched);
  expect_error(temp_path("strlen.gguf"), "truncated");
}

// Finds a byte pattern in the file (to patch a specific field).
size_t find_bytes(const std::vector<uint8_t>& hay, const std::string& needle) {
  const auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end());
  EXPECT_NE(it, hay.end()) << needle;
  return static_cast<size_t>(it - hay.begin());
}

TEST(Gguf, AbsurdArrayLength) {
  auto bytes = read_all(write_sample("arr-src.gguf"));
  // "t.arr" then value type u32 (9), item type u32 (5), then the u64 count.
  const size_t at = find_bytes(bytes, "t.arr") + 5 + 4 + 4;
  const uint64_t huge = uint64_t{1} << 61;
  std::memcpy(bytes.data() + at, &huge, 8);
  write_all(temp_path("arrlen.gguf"), bytes);
  expect_error(temp_path("arrlen.gguf"), "array elements");
}

TEST(Gguf, UnknownValueAndTensorTypes) {
  auto bytes = read_all(write_sample("types-src.gguf"));
  auto patched = bytes;
  const uint32_t bad = 77;
  std::memcpy(patched.data() + find_bytes(patched, "t.u32") + 5, &bad, 4);
  write_all(temp_path("vtype.gguf"), patched);
  expect_error(temp_path("vtype.gguf"), "unknown value type 77");
  // Tensor "b": name, n_dims(4), dims(8), then the type.
  patched = bytes;
  const size_t b_info = find_bytes(patched, std::string("\x01\0\0\0\0\0\0\0b", 9)) + 9;
  std::memcpy(patched.data() + b_info + 4 + 8, &bad, 4);
  write_all(temp_path("ttype.gguf"), patched);
  expect_error(temp_path("ttype.gguf"), "unknown type id 77");
}

TEST(Gguf, TensorPastEndOfFile) {
  const std::string src = write_sample("past-src.gguf");
  auto bytes = read_all(src);
  bytes.resize(data_end(src) - 10);  // cut into tensor b's data
  write_all(temp_path("past.gguf"), bytes);
  expect_error(temp_path("past.gguf"), "extends past the end");
  // A huge offset must not wrap around the bounds check.
  bytes = read_all(write_sample("past-src2.gguf"));
  const size_t b_info = find_bytes(bytes, std::string("\x01\0\0\0\0\0\0\0b", 9)) + 9;
  const uint64_t offset = ~uint64_t{0} - 31;  // aligned, overflows offset + size
  std::memcpy(bytes.data() + b_info + 4 + 8 + 4, &offset, 8);
  write_all(temp_path("wrap.gguf"), bytes);
  EXPECT_THROW(GgufFile::open(temp_path("wrap.gguf")), Error);
}

TEST(Gguf, BadDimensions) {
  auto bytes = read_all(write_sample("dims-src.gguf"));
  const size_t b_info = find_bytes(bytes, std::string("\x01\0\0\0\0\0\0\0b", 9)) + 9;
  auto patched = bytes;
  const uint32_t five = 5;
  std::memcpy(patched.data() + b_info, &five, 4);
  write_all(temp_path("ndims.gguf"), patched);
  expect_error(temp_path("ndims.gguf"), "dimensions");
  patched = bytes;
  const uint64_t odd = 33;  // not a multiple of the Q8_0 block
  std::memcpy(patched.data() + b_info + 4, &odd, 8);
  write_all(temp_path("block.gguf"), patched);
  expect_error(temp_path("block.gguf"), "block size");
}

TEST(Gguf, MissingFileAndDirectory) {
  expect_error(temp_path("does-not-exist.gguf"), "cannot open");
  expect_error(::testing::TempDir(), "not a regular file");
}

TEST(GgufWriter, UnfinishedWriterLeavesNoFile) {
  const std::string path = temp_path("unfinished.gguf");
  {
    GgufWriter w(path);
    w.add_tensor("x", DType::F32, {4});
    std::vector<uint8_t> half(8, 0);
    w.write_tensor_data(half);
  }
  EXPECT_FALSE(std::ifstream(path).good());
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Random corruption of the header: every mutated file either opens or fails with Error; it
// never crashes, hangs or throws anything else.
TEST(Gguf, RandomHeaderCorruptionIsAnErrorOrValid) {
  const auto original = read_all(write_sample("fuzz-src.gguf"));
  const std::string path = temp_path("fuzz.gguf");
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  int opened = 0, rejected = 0;
  const size_t header = std::min<size_t>(original.size(), 700);
  for (int i = 0; i < 3000; ++i) {
    auto bytes = original;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int f = 0; f < flips; ++f) bytes[next() % header] = static_cast<uint8_t>(next());
    write_all(path, bytes);
    try {
      GgufFile::open(path);
      ++opened;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_EQ(opened + rejected, 3000);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// The mixture name as llama.cpp v0.5.0 prints it: general.file_type's name, else the guess from
// the commonest tensor type (the first to reach the top count), marked "(guessed)".
TEST(FileType, NamesAndGuessesAsLlamaCpp) {
  EXPECT_EQ(file_mixture_name(15u, {}), "Q4_K - Medium");
  EXPECT_EQ(file_mixture_name(30u, {}), "IQ4_XS - 4.25 bpw");
  EXPECT_EQ(file_mixture_name(38u, {}), "MXFP4 MoE");
  EXPECT_EQ(file_mixture_name(4u, {}), "unknown, may not work");  // removed Q4_1_SOME_F16
  const DType mostly_q4k[] = {DType::F32, DType::Q4_K, DType::Q6_K, DType::Q4_K, DType::F32};
  // Q4_K and F32 both twice: Q4_K got there first.
  EXPECT_EQ(file_mixture_name(std::nullopt, mostly_q4k), "(guessed) Q4_K - Medium");
  const DType q5_0[] = {DType::Q5_0, DType::F32, DType::Q5_0};
  EXPECT_EQ(file_mixture_name(std::nullopt, q5_0), "(guessed) Q5_0");
  const DType iq2[] = {DType::IQ2_XXS};
  EXPECT_EQ(file_mixture_name(std::nullopt, iq2), "(guessed) IQ2_XXS - 2.0625 bpw");
}

}  // namespace
}  // namespace strata
