// Tests for file formats: safetensors, .npy, PNG/JPEG images, IDX (Fashion-MNIST) and atomic
// writes. Round trips check the bytes we write; each malformed input is written by the test and
// must fail with a gmlp::Error that names the file and the rule it broke, never a crash or a
// huge allocation (ASan turns an attempted multi-terabyte allocation into a crash).
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>
#include <stb/stb_image.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "files.h"
#include "io/atomic_file.h"
#include "io/image.h"
#include "io/npy.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;
using gmlp::cat;

namespace {

using gmlp::test::expect_error;
using gmlp::test::tmp_path;

void put_u64_le(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s += char(v >> (8 * i));
}
void put_u32_be(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s += char(v >> (8 * i));
}

// A safetensors file: the length field, `header` as given, then `data`.
std::string st_bytes(const std::string& header, const std::string& data) {
  std::string s;
  put_u64_le(s, header.size());
  return s + header + data;
}

std::string write_tmp(const std::string& name, const std::string& bytes) {
  std::string path = tmp_path(name);
  gmlp::write_file_atomic(path, bytes);
  return path;
}

std::string write_gz(const std::string& name, const std::string& bytes) {
  std::string path = tmp_path(name);
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  EXPECT_EQ(gzclose(f), Z_OK);
  return path;
}

std::string read_all(const std::string& path) { return gmlp::read_file(path, size_t{1} << 30); }

// ---------------------------------------------------------------------------------------------
// Atomic writes and whole-file reads

TEST(AtomicFile, WritesAndReplacesLeavingNoTempFile) {
  const std::string path = tmp_path("f.bin");
  gmlp::write_file_atomic(path, "first version");
  gmlp::write_file_atomic(path, std::string("a\0b", 3));
  EXPECT_EQ(read_all(path), std::string("a\0b", 3));
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().string().find(path + ".tmp"), std::string::npos) << e.path();
  gmlp::write_file_atomic(path, "");
  EXPECT_EQ(read_all(path), "");
}

TEST(AtomicFile, FailsInMissingFolder) {
  const std::string path = tmp_path("no_such_folder") + "/f.bin";
  expect_error([&] { gmlp::write_file_atomic(path, "x"); },
               {"failed to write '" + path + "'", "No such file or directory"});
}

TEST(AtomicFile, ReadRejectsMissingTooLargeAndFolder) {
  const std::string missing = tmp_path("missing");
  expect_error([&] { gmlp::read_file(missing, 100); }, {"failed to read '" + missing + "': No such file or directory"});
  const std::string big = write_tmp("big", std::string(100, 'x'));
  expect_error([&] { gmlp::read_file(big, 10); }, {"failed to read '" + big + "'", "larger than the limit of 10"});
  const std::string folder = tmp_path("folder");
  fs::create_directories(folder);
  expect_error([&] { gmlp::read_file(folder, 100); }, {"failed to read '" + folder + "'", "not a regular file"});
}

// ---------------------------------------------------------------------------------------------
// safetensors

TEST(Safetensors, RoundTrip) {
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f}, b = {42.0f}, d = {1, 2, 3, 4, 5};
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "12"}};
  const std::string path = tmp_path("rt.safetensors");
  // Names are out of alphabetical order to check that the given order is kept.
  gmlp::st::save(
      path,
      {{"z.weight", {2, 3}, a.data()}, {"b", {}, b.data()}, {"empty", {0, 4}, nullptr}, {"a.bias", {5}, d.data()}},
      meta);

  const auto f = gmlp::st::File::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.tensors().size(), 4u);
  const std::vector<std::string> order = {"z.weight", "b", "empty", "a.bias"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f.tensors()[i].name, order[i]);
    EXPECT_EQ(f.tensors()[i].dtype, gmlp::st::Dtype::F32);
  }
  EXPECT_EQ(f.tensors()[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.tensors()[1].numel(), 1);
  EXPECT_EQ(f.tensors()[2].numel(), 0);
  EXPECT_EQ(f.find("nope"), nullptr);
  ASSERT_NE(f.find("a.bias"), nullptr);
  EXPECT_EQ(f.find("a.bias")->shape, (std::vector<int64_t>{5}));

  const auto ra = f.read_f32("z.weight", {2, 3});
  ASSERT_EQ(ra.size(), a.size());
  EXPECT_EQ(std::memcmp(ra.data(), a.data(), a.size() * 4), 0);  // bit-exact, -0.0 included
  EXPECT_EQ(f.read_f32("b"), b);
  EXPECT_TRUE(f.read_f32("empty", {0, 4}).empty());
  EXPECT_EQ(f.read_f64("a.bias"), (std::vector<double>{1, 2, 3, 4, 5}));
}

TEST(Safetensors, HeaderIsPaddedToEightBytesAndDataIsContiguous) {
  const std::vector<float> x = {1, 2, 3};
  for (const std::string name : {"w", "a_longer_name", "abc"}) {
    const std::string path = tmp_path(name + ".safetensors");
    gmlp::st::save(path, {{name, {3}, x.data()}, {"y", {1}, x.data()}}, {});
    const std::string bytes = read_all(path);
    uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ(n % 8, 0u);
    EXPECT_EQ(bytes[8], '{');
    EXPECT_EQ(bytes.size(), 8 + n + 16);
    EXPECT_EQ(bytes.substr(8, n).find("__metadata__"),
              std::string::npos);  // empty metadata omitted
    const auto f = gmlp::st::File::open(path);
    EXPECT_EQ(f.tensors()[0].begin, 0u);
    EXPECT_EQ(f.tensors()[0].end, 12u);
    EXPECT_EQ(f.tensors()[1].begin, 12u);
    EXPECT_EQ(f.read_f32("y"), std::vector<float>{1});
  }
}

TEST(Safetensors, ConvertsOtherDtypes) {
  // Each value is exactly representable in its dtype; F16 covers a subnormal (2^-24) and inf.
  std::string data;
  auto add = [&](const auto& values) {
    data.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(values[0]));
  };
  add(std::vector<double>{0.1, -1e300});                       // F64  [0, 16)
  add(std::vector<uint16_t>{0x3c00, 0xc000, 0x0001, 0x7c00});  // F16  [16, 24): 1, -2, 2^-24, inf
  add(std::vector<uint16_t>{0x3f80, 0xc040});                  // BF16 [24, 28): 1, -3
  add(std::vector<int64_t>{-5, int64_t{1} << 40});             // I64  [28, 44)
  add(std::vector<int32_t>{-7, 9});                            // I32  [44, 52)
  add(std::vector<uint8_t>{0, 255});                           // U8   [52, 54)
  add(std::vector<int8_t>{-128, 127});                         // I8   [54, 56)
  add(std::vector<int16_t>{-300, 300});                        // I16  [56, 60)
  add(std::vector<uint8_t>{0, 1});                             // BOOL [60, 62)
  const std::string header = R"({"f64": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]},
    "f16": {"dtype": "F16", "shape": [2, 2], "data_offsets": [16, 24]},
    "bf16": {"dtype": "BF16", "shape": [2], "data_offsets": [24, 28]},
    "i64": {"dtype": "I64", "shape": [2], "data_offsets": [28, 44]},
    "i32": {"dtype": "I32", "shape": [2], "data_offsets": [44, 52]},
    "u8": {"dtype": "U8", "shape": [2], "data_offsets": [52, 54]},
    "i8": {"dtype": "I8", "shape": [2], "data_offsets": [54, 56]},
    "i16": {"dtype": "I16", "shape": [2], "data_offsets": [56, 60]},
    "bool": {"dtype": "BOOL", "shape": [2], "data_offsets": [60, 62]}})";
  const std::string path = write_tmp("dtypes.safetensors", st_bytes(header, data));
  const auto f = gmlp::st::File::open(path);
  EXPECT_EQ(f.read_f64("f64"), (std::vector<double>{0.1, -1e300}));
  EXPECT_EQ(f.read_f32("f64")[0], 0.1f);
  EXPECT_EQ(f.read_f32("f16", {2, 2}), (std::vector<float>{1, -2, std::ldexp(1.0f, -24), INFINITY}));
  EXPECT_EQ(f.read_f32("bf16"), (std::vector<float>{1, -3}));
  EXPECT_EQ(f.read_i64("i64"), (std::vector<int64_t>{-5, int64_t{1} << 40}));
  EXPECT_EQ(f.read_f64("i64"), (std::vector<double>{-5, 1099511627776.0}));
  EXPECT_EQ(f.read_i64("i32"), (std::vector<int64_t>{-7, 9}));
  EXPECT_EQ(f.read_i64("u8"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(f.read_f32("u8"), (std::vector<float>{0, 255}));
  EXPECT_EQ(f.read_f32("i8"), (std::vector<float>{-128, 127}));
  EXPECT_EQ(f.read_f32("i16"), (std::vector<float>{-300, 300}));
  EXPECT_EQ(f.read_f32("bool"), (std::vector<float>{0, 1}));
  EXPECT_EQ(f.find("i16")->dtype, gmlp::st::Dtype::I16);
  expect_error([&] { f.read_i64("f16"); },
               {"failed to load '" + path + "'", "tensor 'f16' has dtype F16, expected I64, I32 or U8"});
}

TEST(Safetensors, RejectsWrongShapeAndMissingTensor) {
  const std::vector<float> x(6);
  const std::string path = tmp_path("run.safetensors");
  const std::string name = "blocks.2.mlp_channels.gate.proj.weight";
  gmlp::st::save(path, {{name, {2, 3}, x.data()}}, {});
  const auto f = gmlp::st::File::open(path);
  const std::string want = "': tensor '" + name + "' has shape [2, 3], expected [3, 2]";
  expect_error([&] { f.read_f32(name, {3, 2}); }, {"failed to load '" + path + want});
  expect_error([&] { f.read_f32("nope"); }, {"failed to load '" + path + "': tensor 'nope' not found"});
  expect_error([&] { f.read_i64("nope"); }, {"tensor 'nope' not found"});
}

TEST(Safetensors, RejectsMissingFile) {
  const std::string path = tmp_path("missing.safetensors");
  expect_error([&] { gmlp::st::File::open(path); }, {"'" + path + "'", "No such file or directory"});
}

TEST(Safetensors, RejectsShortFile) {
  const std::string path = write_tmp("short.safetensors", std::string(5, '\0'));
  expect_error([&] { gmlp::st::File::open(path); },
               {"failed to load '" + path + "': the file is 5 bytes, shorter than the 8-byte header length"});
}

TEST(Safetensors, RejectsTruncatedHeader) {
  std::string s;
  put_u64_le(s, 100);
  const std::string path = write_tmp("trunc.safetensors", s + "{\"a\": {}}");
  expect_error([&] { gmlp::st::File::open(path); },
               {"failed to load '" + path + "'", "says 100 bytes but only 9 bytes follow it"});
}

TEST(Safetensors, RejectsHeaderLengthOf2To63WithoutAllocating) {
  std::string s;
  put_u64_le(s, uint64_t{1} << 63);
  const std::string path = write_tmp("huge.safetensors", s + "{}");
  expect_error([&] { gmlp::st::File::open(path); },
               {"failed to load '" + path + "'", "9223372036854775808 bytes, more than the limit of 100000000"});
}

TEST(Safetensors, RejectsTensorOf10To12ElementsWithoutAllocating) {
  // 10^12 floats = 4 TB: the offsets cannot cover it (past the end), or do not match it.
  const std::string past =
      write_tmp("past.safetensors", st_bytes(R"({"w": {"dtype": "F32", "shape": [1000000, 1000000], )"
                                             R"("data_offsets": [0, 4000000000000]}})",
                                             "abcd"));
  expect_error(
      [&] { gmlp::st::File::open(past); },
      {"failed to load '" + past + "'", "data_offsets [0, 4000000000000] past the end of the 4-byte data buffer"});
  const std::string small =
      write_tmp("small.safetensors",
                st_bytes(R"({"w": {"dtype": "F32", "shape": [1000000, 1000000], "data_offsets": [0, 4]}})", "abcd"));
  expect_error(
      [&] { gmlp::st::File::open(small); },
      {"failed to load '" + small + "'", "spanning 4 bytes, expected 4000000000000 for F32 shape [1000000, 1000000]"});
}

TEST(Safetensors, RejectsMalformedHeaders) {
  struct Case {
    std::string header, data, phrase;
  };
  const std::string ok = R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8])";
  const std::vector<Case> cases = {
      {R"({"a": )", "", "the header is not valid JSON"},
      {"\xff\xfe", "", "the header is not valid JSON (error at byte 1 of 2)"},
      {R"({"t": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 0]}})", "",
       "not valid JSON (a number is out of range)"},
      {"[1, 2]", "", "the header is a JSON array, expected an object"},
      {R"("text")", "", "the header is a JSON string, expected an object"},
      {R"({"t": 5})", "", "entry 't' is a JSON number, expected an object"},
      {R"({"t": {"shape": [2], "data_offsets": [0, 8]}})", "12345678", "tensor 't' has no \"dtype\" field"},
      {R"({"t": {"dtype": "F32", "data_offsets": [0, 8]}})", "12345678", "tensor 't' has no \"shape\" field"},
      {R"({"t": {"dtype": "F32", "shape": [2]}})", "12345678", "tensor 't' has no \"data_offsets\" field"},
      {R"({"t": {"dtype": 5, "shape": [2], "data_offsets": [0, 8]}})", "12345678",
       "\"dtype\" of JSON type number, expected a string"},
      {R"({"t": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", "12",
       "tensor 't' has unknown dtype 'F8_E4M3'"},
      {R"({"t": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}})", "12345678",
       "\"shape\" of JSON type string, expected an array"},
      {R"({"t": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", "12345678",
       "shape [2.5], expected an array of non-negative integers"},
      {R"({"t": {"dtype": "F32", "shape": [[2]], "data_offsets": [0, 8]}})", "12345678",
       "shape [<array>], expected an array of non-negative integers"},
      {R"({"t": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 8]}})", "12345678",
       "tensor 't' has a negative dimension in shape [2, -3]"},
      {R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", "12345678",
       "overflows 64 bits"},
      {R"({"t": {"dtype": "F64", "shape": [2305843009213693952, 2], "data_offsets": [0, 8]}})", "12345678",
       "overflows 64 bits"},
      {R"({"t": {"dtype": "U8", "shape": [18446744073709551615], "data_offsets": [0, 8]}})", "12345678",
       "overflows 64 bits"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", "12345678",
       "\"data_offsets\" [0], expected [begin, end] with 0 <= begin <= end"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", "12345678",
       "\"data_offsets\" [8, 0], expected [begin, end]"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [-1, 7]}})", "12345678", "expected [begin, end]"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": {"a": 1}}})", "12345678",
       "\"data_offsets\" <object>, expected [begin, end]"},
      {"{\"t\": {" + ok + "}}", "1234", "data_offsets [0, 8] past the end of the 4-byte data buffer"},
      {R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", "12345678",
       "spanning 8 bytes, expected 12 for F32 shape [3]"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, )"
       R"("b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       "123456789012", "tensors 'a' [0, 8] and 'b' [4, 12] overlap"},
      {"{\"__metadata__\": [1], \"t\": {" + ok + "}}", "12345678", "\"__metadata__\" is a JSON array"},
      {"{\"__metadata__\": {\"k\": 1}, \"t\": {" + ok + "}}", "12345678",
       "\"__metadata__\" value for 'k' is a JSON number, expected a string"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].header);
    const std::string path = write_tmp(cat("case", i, ".safetensors"), st_bytes(cases[i].header, cases[i].data));
    expect_error([&] { gmlp::st::File::open(path); }, {"failed to load '" + path + "': ", cases[i].phrase});
  }
}

TEST(Safetensors, RejectsDeeplyNestedShapeWithoutCrashing) {
  const std::string shape = std::string(100000, '[') + std::string(100000, ']');
  const std::string path = write_tmp(
      "deep.safetensors", st_bytes(R"({"t": {"dtype": "F32", "data_offsets": [0, 0], "shape": )" + shape + "}}", ""));
  expect_error([&] { gmlp::st::File::open(path); }, {path, "expected an array of non-negative integers"});
}

TEST(Safetensors, AllowsHolesAndSortsByOffset) {
  const float a = 1.0f, b = 2.0f;
  std::string data(12, '\0');
  std::memcpy(&data[0], &b, 4);
  std::memcpy(&data[8], &a, 4);
  const std::string path =
      write_tmp("holes.safetensors", st_bytes(R"({"a": {"dtype": "F32", "shape": [], "data_offsets": [8, 12]}, )"
                                              R"("b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                                              data));
  const auto f = gmlp::st::File::open(path);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[0].name, "b");
  EXPECT_EQ(f.tensors()[1].name, "a");
  EXPECT_EQ(f.read_f32("a", {}), std::vector<float>{1.0f});
  EXPECT_EQ(f.read_f32("b", {1}), std::vector<float>{2.0f});
}

TEST(Safetensors, SaveRejectsDuplicateAndReservedNames) {
  const float x = 1;
  const std::string path = tmp_path("dup.safetensors");
  expect_error(
      [&] {
        gmlp::st::save(path, {{"w", {1}, &x}, {"w", {1}, &x}}, {});
      },
      {"failed to save '" + path + "': tensor name 'w' is used twice or reserved"});
  expect_error([&] { gmlp::st::save(path, {{"__metadata__", {1}, &x}}, {}); }, {"'__metadata__'"});
  expect_error([&] { gmlp::st::save(path, {{"w", {-1}, &x}}, {}); }, {"negative shape [-1]"});
  EXPECT_FALSE(fs::exists(path));
}

TEST(Safetensors, ShapeStr) {
  EXPECT_EQ(gmlp::st::shape_str({49, 49}), "[49, 49]");
  EXPECT_EQ(gmlp::st::shape_str({}), "[]");
  EXPECT_EQ(gmlp::st::shape_str({7}), "[7]");
}

// ---------------------------------------------------------------------------------------------
// .npy

std::string npy_header(const std::string& path) {
  const std::string bytes = read_all(path);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t len = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
  EXPECT_EQ((10 + len) % 64, 0u);
  EXPECT_EQ(bytes[10 + len - 1], '\n');
  return bytes.substr(10, len);
}

TEST(Npy, HeaderBytesAndData) {
  const std::vector<float> x = {1, -2, 3.5f, 0, 5, 6};
  const std::string path = tmp_path("x.npy");
  gmlp::save_npy_f32(path, x.data(), {2, 3});
  const std::string header = npy_header(path);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(header, dict + std::string(header.size() - dict.size() - 1, ' ') + "\n");
  const std::string bytes = read_all(path);
  ASSERT_EQ(bytes.size(), 10 + header.size() + 24);
  EXPECT_EQ(std::memcmp(bytes.data() + 10 + header.size(), x.data(), 24), 0);
}

TEST(Npy, ShapeTuples) {
  const float x[5] = {1, 2, 3, 4, 5};
  const std::string p1 = tmp_path("1d.npy"), p0 = tmp_path("0d.npy"), pe = tmp_path("empty.npy");
  gmlp::save_npy_f32(p1, x, {5});
  gmlp::save_npy_f32(p0, x, {});
  gmlp::save_npy_f32(pe, nullptr, {0, 3});
  EXPECT_EQ(npy_header(p1).find("'shape': (5,), }"), 41u);
  EXPECT_EQ(npy_header(p0).find("'shape': (), }"), 41u);
  EXPECT_NE(npy_header(pe).find("'shape': (0, 3), }"), std::string::npos);
  EXPECT_EQ(read_all(p0).size(), 128u + 4u);  // the 10-byte prefix and the dict exceed 64 bytes
  expect_error([&] { gmlp::save_npy_f32(pe, x, {-1}); }, {"failed to save '" + pe + "'", "negative dimension"});
}

// ---------------------------------------------------------------------------------------------
// Images

std::vector<uint8_t> random_pixels(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> px(n);
  for (auto& p : px) p = uint8_t(rng());
  return px;
}

TEST(Image, PngRoundTripGrayIsExact) {
  const int w = 5, h = 7;
  const auto px = random_pixels(w * h, 1);
  const std::string path = tmp_path("gray.png");
  gmlp::img::write_png(path, w, h, 1, px.data());
  const auto x = gmlp::img::load_image(path, 1, h, w);
  ASSERT_EQ(x.size(), size_t(w * h));
  for (int i = 0; i < w * h; ++i) EXPECT_EQ(x[i], px[i] / 255.0f) << i;
}

TEST(Image, RgbIsReturnedChw) {
  const int w = 3, h = 2;
  const auto px = random_pixels(w * h * 3, 2);
  const std::string path = tmp_path("rgb.png");
  gmlp::img::write_png(path, w, h, 3, px.data());
  const auto x = gmlp::img::load_image(path, 3, h, w);  // (3, h, w)
  ASSERT_EQ(x.size(), size_t(3 * w * h));
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < w * h; ++i) EXPECT_EQ(x[c * w * h + i], px[i * 3 + c] / 255.0f);
}

TEST(Image, ColorToGrayUsesRec601Luma) {
  // Pure red, green, blue and one mixed pixel: each weight shows separately.
  const std::vector<uint8_t> px = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 100, 200};
  const std::string path = tmp_path("luma.png");
  gmlp::img::write_png(path, 2, 2, 3, px.data());
  const auto x = gmlp::img::load_image(path, 1, 2, 2);
  ASSERT_EQ(x.size(), 4u);
  EXPECT_NEAR(x[0], 0.299f, 1e-6);
  EXPECT_NEAR(x[1], 0.587f, 1e-6);
  EXPECT_NEAR(x[2], 0.114f, 1e-6);
  EXPECT_NEAR(x[3], (0.299f * 10 + 0.587f * 100 + 0.114f * 200) / 255.0f, 1e-6);
}

TEST(Image, GrayIsReplicatedAndAlphaDropped) {
  const std::string gray = tmp_path("g.png"), rgba = tmp_path("rgba.png");
  const std::vector<uint8_t> g = {0, 51, 255, 102};
  gmlp::img::write_png(gray, 2, 2, 1, g.data());
  const auto x = gmlp::img::load_image(gray, 3, 2, 2);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(x[c * 4 + i], g[i] / 255.0f);
  const std::vector<uint8_t> p = {255, 0, 51, 0};  // one pixel, alpha 0
  gmlp::img::write_png(rgba, 1, 1, 4, p.data());
  EXPECT_EQ(gmlp::img::load_image(rgba, 3, 1, 1), (std::vector<float>{1.0f, 0.0f, 0.2f}));
}

TEST(Image, ResizesToTheRequestedSize) {
  const std::vector<uint8_t> flat(8 * 8, 200);
  const std::string path = tmp_path("flat.png");
  gmlp::img::write_png(path, 8, 8, 1, flat.data());
  for (auto [h, w] : {std::pair{4, 4}, std::pair{16, 12}, std::pair{3, 5}}) {
    const auto x = gmlp::img::load_image(path, 1, h, w);
    ASSERT_EQ(x.size(), size_t(h * w));
    for (float v : x) EXPECT_NEAR(v, 200 / 255.0f, 1e-4);
  }
  // A left-dark, right-bright image stays so after halving, within [0, 1].
  std::vector<uint8_t> step(8 * 8);
  for (int i = 0; i < 64; ++i) step[i] = i % 8 < 4 ? 0 : 255;
  gmlp::img::write_png(path, 8, 8, 1, step.data());
  const auto x = gmlp::img::load_image(path, 1, 4, 4);
  for (int y = 0; y < 4; ++y) {
    EXPECT_LT(x[y * 4 + 0], 0.1f);
    EXPECT_GT(x[y * 4 + 3], 0.9f);
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(x[y * 4 + i] >= 0.0f && x[y * 4 + i] <= 1.0f);
  }
}

TEST(Image, RejectsMissingFileAndNonImage) {
  const std::string missing = tmp_path("missing.png");
  expect_error([&] { gmlp::img::load_image(missing, 3, 4, 4); }, {"'" + missing + "'", "No such file or directory"});
  const std::string text = write_tmp("text.png", "this is not an image");
  expect_error([&] { gmlp::img::load_image(text, 3, 4, 4); }, {"failed to load image '" + text +
                                                               "': unknown image format: expected PNG, JPEG or binary "
                                                               "PGM/PPM (P5/P6), found bytes 74 68 69 73 ..."});
  const std::string trunc = tmp_path("trunc.png");
  const auto px = random_pixels(64 * 64, 3);
  gmlp::img::write_png(trunc, 64, 64, 1, px.data());
  gmlp::write_file_atomic(trunc, read_all(trunc).substr(0, 100));
  expect_error([&] { gmlp::img::load_image(trunc, 1, 64, 64); },
               {"failed to load image '" + trunc + "': cannot decode it"});
}

TEST(Image, RejectsBadArguments) {
  const uint8_t px[4] = {};
  const std::string path = tmp_path("a.png");
  gmlp::img::write_png(path, 2, 2, 1, px);
  expect_error([&] { gmlp::img::load_image(path, 2, 2, 2); }, {path, "channels must be 1 or 3 (got 2)"});
  expect_error([&] { gmlp::img::load_image(path, 1, 0, 2); }, {path, "requested size 0x2"});
  expect_error([&] { gmlp::img::write_png(path, 2, 2, 5, px); }, {"failed to write image '" + path + "'"});
}

// Images made by libpng's and libjpeg's encoders, decoded by gmlp and by stb_image (the decoder
// gmlp used before, kept here as the reference on well-formed files only).

std::string png_bytes(int w, int h, int depth, int color, bool interlace, const std::vector<uint8_t>& packed,
                      int palette_size = 0, int trns = 0) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  std::string out;
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep d, png_size_t n) {
        static_cast<std::string*>(png_get_io_ptr(p))->append(reinterpret_cast<char*>(d), n);
      },
      nullptr);
  png_set_IHDR(png, info, w, h, depth, color, interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> pal(palette_size);
  std::vector<png_byte> alpha(trns, 128);
  for (int i = 0; i < palette_size; ++i) pal[i] = {png_byte(i * 37), png_byte(255 - i * 11), png_byte(i * i)};
  if (palette_size) png_set_PLTE(png, info, pal.data(), palette_size);
  if (trns) png_set_tRNS(png, info, alpha.data(), trns, nullptr);
  png_write_info(png, info);
  const size_t stride = packed.size() / h;
  std::vector<png_bytep> rows(h);
  for (int y = 0; y < h; ++y) rows[y] = const_cast<uint8_t*>(packed.data()) + y * stride;
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// components 1 (gray), 3 (RGB) or 4 (CMYK, written with Adobe's marker as YCCK or CMYK).
std::string jpeg_bytes(int w, int h, int components, const std::vector<uint8_t>& px, bool progressive,
                       J_COLOR_SPACE stored = JCS_UNKNOWN) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w, c.image_height = h, c.input_components = components;
  c.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c);
  if (stored != JCS_UNKNOWN) jpeg_set_colorspace(&c, stored);
  jpeg_set_quality(&c, 90, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(px.data()) + size_t(c.next_scanline) * w * components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<char*>(buf), size);
  free(buf);
  return out;
}

// stb_image's reading of a well-formed file, as gmlp's Pixels (gray or RGB, alpha dropped).
gmlp::img::Pixels stb_reference(const std::string& bytes) {
  int w = 0, h = 0, n = 0;
  stbi_uc* px = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), int(bytes.size()), &w, &h, &n, 0);
  EXPECT_NE(px, nullptr) << stbi_failure_reason();
  gmlp::img::Pixels out{w, h, n >= 3 ? 3 : 1, {}};
  for (int i = 0; px && i < w * h; ++i)
    for (int c = 0; c < out.channels; ++c) out.hwc.push_back(px[i * n + c]);
  stbi_image_free(px);
  return out;
}

gmlp::img::Pixels decode(const std::string& bytes, const std::string& name = "mem") {
  return gmlp::img::decode_image(name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// The largest difference between two decodings of the same image (which must agree in size).
int max_diff(const gmlp::img::Pixels& a, const gmlp::img::Pixels& b) {
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.channels, b.channels);
  if (a.hwc.size() != b.hwc.size()) return 256;
  int d = 0;
  for (size_t i = 0; i < a.hwc.size(); ++i) d = std::max(d, std::abs(int(a.hwc[i]) - int(b.hwc[i])));
  return d;
}

TEST(Image, PngDecodesEveryLayoutAsStbImageDid) {
  const int w = 13, h = 9;
  struct Case {
    const char* what;
    int depth, color, channels, palette, trns;
  };
  const Case cases[] = {
      {"gray 8", 8, PNG_COLOR_TYPE_GRAY, 1, 0, 0},
      {"gray 1", 1, PNG_COLOR_TYPE_GRAY, 1, 0, 0},
      {"gray 2", 2, PNG_COLOR_TYPE_GRAY, 1, 0, 0},
      {"gray 4", 4, PNG_COLOR_TYPE_GRAY, 1, 0, 0},
      {"gray 16", 16, PNG_COLOR_TYPE_GRAY, 1, 0, 0},
      {"gray+alpha 8", 8, PNG_COLOR_TYPE_GRAY_ALPHA, 2, 0, 0},
      {"gray+alpha 16", 16, PNG_COLOR_TYPE_GRAY_ALPHA, 2, 0, 0},
      {"RGB 8", 8, PNG_COLOR_TYPE_RGB, 3, 0, 0},
      {"RGB 16", 16, PNG_COLOR_TYPE_RGB, 3, 0, 0},
      {"RGBA 8", 8, PNG_COLOR_TYPE_RGB_ALPHA, 4, 0, 0},
      {"RGBA 16", 16, PNG_COLOR_TYPE_RGB_ALPHA, 4, 0, 0},
      {"palette 8", 8, PNG_COLOR_TYPE_PALETTE, 1, 200, 0},
      {"palette 4 with tRNS", 4, PNG_COLOR_TYPE_PALETTE, 1, 16, 5},
      {"palette 1", 1, PNG_COLOR_TYPE_PALETTE, 1, 2, 0},
  };
  for (const Case& k : cases)
    for (bool interlace : {false, true}) {
      SCOPED_TRACE(cat(k.what, interlace ? ", interlaced" : ""));
      const size_t stride = (size_t(w) * k.channels * k.depth + 7) / 8;
      auto packed = random_pixels(stride * h, unsigned(k.depth * 31 + k.color));
      if (k.palette)  // indices within the palette
        for (auto& b : packed) b = k.depth == 8 ? b % k.palette : b;
      const std::string bytes = png_bytes(w, h, k.depth, k.color, interlace, packed, k.palette, k.trns);
      EXPECT_EQ(max_diff(decode(bytes), stb_reference(bytes)), 0);
    }
}

TEST(Image, JpegDecodesAsStbImageWithinIdctDifferences) {
  const int w = 37, h = 21;  // odd sides: partial blocks and chroma subsampling edges
  // A smooth picture with an edge: what photographs look like to the IDCT and upsampling.
  auto picture = [&](int components) {
    std::vector<uint8_t> px(size_t(w) * h * components);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < components; ++c)
          px[(size_t(y) * w + x) * components + c] =
              uint8_t(std::clamp(40 + 5 * x + 3 * y * (c + 1) + (x > 20 ? 60 : 0), 0, 255));
    return px;
  };
  struct Case {
    const char* what;
    int components;
    bool progressive;
    J_COLOR_SPACE stored;
  };
  const Case cases[] = {{"gray", 1, false, JCS_UNKNOWN},       {"YCbCr", 3, false, JCS_UNKNOWN},
                        {"progressive", 3, true, JCS_UNKNOWN}, {"RGB stored", 3, false, JCS_RGB},
                        {"CMYK", 4, false, JCS_CMYK},          {"YCCK", 4, false, JCS_YCCK}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const std::string bytes = jpeg_bytes(w, h, k.components, picture(k.components), k.progressive, k.stored);
    const auto ours = decode(bytes);
    EXPECT_EQ(ours.channels, k.components == 1 ? 1 : 3);
    EXPECT_LE(max_diff(ours, stb_reference(bytes)), 3);
  }
}

TEST(Image, JpegWithTooManyHuffmanCodesIsRejected) {
  // SOI, then a DHT segment whose 16 code-length counts sum to 272: more codes than the 256 a
  // table may hold (stb_image 2.27 wrote past its 257-entry array on this), then EOI.
  std::string jpeg = "\xff\xd8\xff\xc4";
  const int counts = 16 * 17, length = 2 + 1 + 16 + counts;
  jpeg += char(length >> 8), jpeg += char(length & 255);
  jpeg += '\x00';  // DC table 0
  jpeg += std::string(16, char(17));
  for (int i = 0; i < counts; ++i) jpeg += char(i);
  jpeg += "\xff\xd9";
  const std::string path = write_tmp("huffman.jpg", jpeg);
  expect_error(
      [&] { gmlp::img::load_image(path, 3, 8, 8); },
      {"failed to load image '" + path + "': cannot decode it as JPEG (libjpeg: Bogus Huffman table definition)"});
}

TEST(Image, PngChunkLengthsAreCheckedBeforeLibpngAllocates) {
  // A valid PNG with a zTXt chunk inserted after IHDR whose length field says 1,912,602,624
  // bytes: libpng 1.6.39 allocates a text chunk's declared length before reading it (found by
  // fuzz_image), so the lengths are checked against the file first.
  const std::vector<uint8_t> gray(9 * 13, 100);
  std::string png = png_bytes(9, 13, 8, PNG_COLOR_TYPE_GRAY, false, gray);
  const size_t after_ihdr = 8 + 12 + 13;
  png.insert(after_ihdr, std::string("\x72\x00\x00\x00zTXtBig\0\0\x78\x9c", 15));
  expect_error([&] { decode(png, "ztxt.png"); },
               {"failed to load image 'ztxt.png': cannot decode it as PNG: its chunk 'zTXt' at byte 33 declares "
                "1912602624 bytes of data, but only "});
}

TEST(Image, RejectsTruncatedAndOversizedFilesFromTheirHeaders) {
  const std::vector<uint8_t> gray(64 * 64, 100);
  const std::string jpeg = jpeg_bytes(64, 64, 1, gray, false);
  expect_error([&] { decode(jpeg.substr(0, jpeg.size() / 2), "half.jpg"); },
               {"failed to load image 'half.jpg': cannot decode it as JPEG (libjpeg: Premature end of JPEG file)"});
  const std::string png = png_bytes(64, 64, 8, PNG_COLOR_TYPE_GRAY, false, gray);
  expect_error([&] { decode(png.substr(0, png.size() - 20), "half.png"); },
               {"failed to load image 'half.png': cannot decode it as PNG: its chunk 'IDAT' at byte "});
  expect_error([&] { decode(png.substr(0, png.size() - 12), "noend.png"); },  // every chunk whole, no IEND
               {"failed to load image 'noend.png': cannot decode it as PNG (libpng: "});
  // Sides above the limit, refused from the header: the pixel data is not even there.
  const std::vector<uint8_t> row(9000, 7);
  expect_error([&] { decode(png_bytes(9000, 1, 8, PNG_COLOR_TYPE_GRAY, false, row), "wide.png"); },
               {"failed to load image 'wide.png': the PNG image is 9000x1: expected sides 1..8192"});
  expect_error([&] { decode(jpeg_bytes(9000, 1, 1, row, false), "wide.jpg"); },
               {"failed to load image 'wide.jpg': the JPEG image is 9000x1: expected sides 1..8192"});
  expect_error([&] { decode("P5\n100000 100000\n255\n", "huge.pgm"); },
               {"failed to load image 'huge.pgm': the PGM image is 100000x100000: expected sides 1..8192"});
  // A PNG header declaring 8192 x 8192 (within the limit) whose data is missing: an error, and
  // only the rows libpng reads are allocated, never more than the file can fill.
  const std::string big = png_bytes(8192, 1, 8, PNG_COLOR_TYPE_GRAY, false, std::vector<uint8_t>(8192));
  std::string tall = big;
  tall[16 + 4 + 4 + 3] = 0, tall[16 + 4 + 4 + 2] = 0x20;  // height 1 -> 8192 (IHDR's CRC is now wrong)
  expect_error([&] { decode(tall, "tall.png"); }, {"failed to load image 'tall.png': cannot decode it as PNG"});
  expect_error([&] { decode("", "empty.png"); },
               {"failed to load image 'empty.png': unknown image format", "found an empty file"});
  expect_error([&] { decode("BM6\x01\x02", "a.bmp"); },
               {"failed to load image 'a.bmp': unknown image format: expected PNG, JPEG or binary "
                "PGM/PPM (P5/P6), found bytes 42 4d 36 01 ..."});
}

TEST(Image, ReadsBinaryPgmAndPpm) {
  const auto g = random_pixels(6 * 4, 5);
  const std::string pgm = "P5\n# a comment\n6 4\n255\n" + std::string(g.begin(), g.end());
  auto x = decode(pgm);
  EXPECT_EQ(x.width, 6);
  EXPECT_EQ(x.height, 4);
  EXPECT_EQ(x.channels, 1);
  EXPECT_EQ(x.hwc, g);
  EXPECT_EQ(max_diff(x, stb_reference(pgm)), 0);
  const auto c = random_pixels(2 * 3 * 3, 6);
  const std::string ppm = "P6 2 3 255 " + std::string(c.begin(), c.end());
  EXPECT_EQ(decode(ppm).hwc, c);
  EXPECT_EQ(max_diff(decode(ppm), stb_reference(ppm)), 0);
  // 16-bit samples (big-endian) keep their high byte when maxval is 65535; others are scaled.
  EXPECT_EQ(decode(std::string("P5 2 1 65535\n\x12\x34\xff\xff", 17)).hwc, (std::vector<uint8_t>{0x12, 0xff}));
  EXPECT_EQ(decode(std::string("P5 2 1 15\n\x0f\x05", 12)).hwc, (std::vector<uint8_t>{255, 85}));
  expect_error([&] { decode("P5 4 4 255\nabc", "short.pgm"); },
               {"failed to load image 'short.pgm': cannot decode it as PGM/PPM: 4x4 pixels need 16 bytes of "
                "samples, the file has 3"});
  expect_error([&] { decode("P6 4 x", "bad.ppm"); },
               {"failed to load image 'bad.ppm': cannot decode it as PGM/PPM: expected the height in its header"});
  expect_error([&] { decode("P5 1 1 0\n\x01", "zero.pgm"); }, {"maximum value 0, expected 1..65535"});
}

// ---------------------------------------------------------------------------------------------
// IDX / Fashion-MNIST

std::string idx_images(uint32_t count, uint32_t h, uint32_t w, const std::string& pixels, uint32_t magic = 0x803) {
  std::string s;
  put_u32_be(s, magic);
  for (uint32_t d : {count, h, w}) put_u32_be(s, d);
  return s + pixels;
}

std::string idx_labels(const std::string& labels) {
  std::string s;
  put_u32_be(s, 0x801);
  put_u32_be(s, uint32_t(labels.size()));
  return s + labels;
}

TEST(Idx, LoadsFashionMnist) {
  if (!fs::exists(gmlp::data::kFashionMnistDir)) GTEST_SKIP() << "no Fashion-MNIST at " << gmlp::data::kFashionMnistDir;
  const auto train = gmlp::data::load_fashion_mnist(gmlp::data::kFashionMnistDir, "train");
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(train.channels, 1);
  EXPECT_EQ(train.height, 28);
  EXPECT_EQ(train.width, 28);
  EXPECT_EQ(train.classes, 10);
  EXPECT_EQ(train.pixels.size(), 60000u * 28 * 28);
  ASSERT_EQ(train.labels.size(), 60000u);
  EXPECT_EQ(train.labels[0], 9);  // checked with numpy: the first training image is an ankle boot
  ASSERT_EQ(train.class_names.size(), 10u);
  EXPECT_EQ(train.class_names[0], "T-shirt/top");
  EXPECT_EQ(train.class_names[9], "Ankle boot");
  std::vector<int> per_class(10);
  for (uint8_t l : train.labels) ++per_class[l];
  EXPECT_EQ(per_class, std::vector<int>(10, 6000));  // the dataset is balanced

  const auto test = gmlp::data::load_fashion_mnist(gmlp::data::kFashionMnistDir, "test");
  EXPECT_EQ(test.count, 10000);
  EXPECT_EQ(test.pixels.size(), 10000u * 28 * 28);
  EXPECT_EQ(test.labels.size(), 10000u);
}

TEST(Idx, ReadsRawAndGzipAlike) {
  const std::string pixels(
      "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\xf0\xf1\xf2\xf3\xf4\xfe\xfd\xff\x10\x20\x30"
      "\x40",
      24);
  const std::string images = idx_images(3, 2, 4, pixels), labels = idx_labels(std::string("\x02\x00\x07", 3));
  const auto raw = gmlp::data::load_idx(write_tmp("img", images), write_tmp("lbl", labels));
  const auto gz = gmlp::data::load_idx(write_gz("img.gz", images), write_gz("lbl.gz", labels));
  for (const auto* s : {&raw, &gz}) {
    EXPECT_EQ(s->count, 3);
    EXPECT_EQ(s->channels, 1);
    EXPECT_EQ(s->height, 2);
    EXPECT_EQ(s->width, 4);
    EXPECT_EQ(s->classes, 8);
    EXPECT_EQ(std::string(s->pixels.begin(), s->pixels.end()), pixels);
    EXPECT_EQ(s->labels, (std::vector<uint8_t>{2, 0, 7}));
  }
}

TEST(Idx, FashionMnistFallsBackToRawFiles) {
  const std::string dir = tmp_path("fmnist");
  fs::create_directories(dir);
  gmlp::write_file_atomic(dir + "/t10k-images-idx3-ubyte", idx_images(2, 1, 1, "\x05\x06"));
  gmlp::write_file_atomic(dir + "/t10k-labels-idx1-ubyte", idx_labels("\x09\x01"));
  const auto s = gmlp::data::load_fashion_mnist(dir, "test");
  EXPECT_EQ(s.count, 2);
  EXPECT_EQ(s.classes, 10);
  EXPECT_EQ(s.labels, (std::vector<uint8_t>{9, 1}));
  EXPECT_EQ(s.class_names.size(), 10u);
  expect_error([&] { gmlp::data::load_fashion_mnist(dir, "train"); },
               {"neither '" + dir + "/train-labels-idx1-ubyte.gz' nor '" + dir + "/train-labels-idx1-ubyte' exists"});
  expect_error([&] { gmlp::data::load_fashion_mnist(dir, "val"); },
               {"unknown split 'val' (expected 'train' or 'test')"});
}

TEST(Idx, RejectsLabelOutOfRange) {
  const std::string dir = tmp_path("fmnist");
  fs::create_directories(dir);
  gmlp::write_file_atomic(dir + "/train-images-idx3-ubyte", idx_images(2, 1, 1, "\x05\x06"));
  gmlp::write_file_atomic(dir + "/train-labels-idx1-ubyte", idx_labels("\x01\x0a"));
  expect_error(
      [&] { gmlp::data::load_fashion_mnist(dir, "train"); },
      {"failed to load '" + dir + "/train-labels-idx1-ubyte': label 10 at index 1 is out of range for the 10"});
}

TEST(Idx, RejectsMissingFile) {
  const std::string labels = write_tmp("lbl", idx_labels("\x01"));
  const std::string missing = tmp_path("missing-images");
  expect_error([&] { gmlp::data::load_idx(missing, labels); },
               {"failed to load '" + missing + "': No such file or directory"});
}

TEST(Idx, RejectsWrongMagic) {
  const std::string labels = write_tmp("lbl", idx_labels("\x01"));
  // A label file passed as images.
  expect_error([&] { gmlp::data::load_idx(labels, labels); },
               {"failed to load '" + labels +
                "': expected IDX magic 0x00000803 (unsigned byte images, 3 dimensions), found 0x00000801"});
  const std::string images = write_tmp("img", idx_images(1, 1, 1, "\x01"));
  expect_error([&] { gmlp::data::load_idx(images, images); },
               {"failed to load '" + images +
                "': expected IDX magic 0x00000801 (unsigned byte labels, 1 dimension), found 0x00000803"});
  const std::string floats = write_tmp("f", idx_images(1, 1, 1, "\x01\x02\x03\x04", 0x00000d03));
  expect_error([&] { gmlp::data::load_idx(floats, labels); }, {"found 0x00000d03"});
}

TEST(Idx, RejectsTruncatedFiles) {
  const std::string labels = write_tmp("lbl", idx_labels("\x01\x02"));
  const std::string header = write_tmp("hdr", idx_images(2, 2, 2, "").substr(0, 10));
  expect_error([&] { gmlp::data::load_idx(header, labels); },
               {"failed to load '" + header + "': the file ends inside the IDX header (10 of 16 bytes)"});
  const std::string raw = write_tmp("raw", idx_images(2, 2, 2, "1234567"));
  expect_error(
      [&] { gmlp::data::load_idx(raw, labels); },
      {"failed to load '" + raw + "': the data ends after 7 of the 8 bytes its header declares (2 images of 2x2)"});
  const std::string short_labels = write_tmp("lbl_short", idx_labels("\x01\x02").substr(0, 9));
  const std::string ok = write_tmp("ok", idx_images(2, 2, 2, "12345678"));
  expect_error([&] { gmlp::data::load_idx(ok, short_labels); },
               {"failed to load '" + short_labels + "': the data ends after 1 of the 2"});

  // A gzip stream cut in half: the data ends early and zlib says why. (Random pixels: a stream
  // of one value would compress so well that half of it could not hold the declared size.)
  std::mt19937 rng(5);
  std::string pixels(100 * 28 * 28, '\0');
  for (char& c : pixels) c = char(rng());
  const std::string gz = write_gz("cut.gz", idx_images(100, 28, 28, pixels));
  const std::string bytes = read_all(gz);
  gmlp::write_file_atomic(gz, bytes.substr(0, bytes.size() / 2));
  expect_error([&] { gmlp::data::load_idx(gz, labels); }, {"failed to load '" + gz + "': the data ends after",
                                                           "of the 78400 bytes", "; zlib: unexpected end of file"});
}

TEST(Idx, RejectsCorruptGzip) {
  const std::string labels = write_tmp("lbl", idx_labels("\x01\x02"));
  std::mt19937 rng(4);
  std::string pixels(2 * 28 * 28, '\0');
  for (char& c : pixels) c = char(rng() % 4);
  const std::string gz = write_gz("bad.gz", idx_images(2, 28, 28, pixels));
  std::string bytes = read_all(gz);
  for (size_t i = 20; i < 40; ++i) bytes[i] = char(~bytes[i]);  // inside the deflate stream
  gmlp::write_file_atomic(gz, bytes);
  expect_error([&] { gmlp::data::load_idx(gz, labels); }, {"failed to load '" + gz + "': corrupt gzip data (zlib: "});
  // A flipped byte of the CRC trailer is only seen once the stream is read to its end.
  std::string crc = read_all(write_gz("crc.gz", idx_images(2, 28, 28, pixels)));
  crc[crc.size() - 6] = char(~crc[crc.size() - 6]);
  const std::string crc_path = write_tmp("crc.gz", crc);
  expect_error([&] { gmlp::data::load_idx(crc_path, labels); },
               {"failed to load '" + crc_path + "': corrupt gzip data (zlib: incorrect data check)"});
}

TEST(Idx, RejectsAbsurdDimsBeforeAllocating) {
  const std::string labels = write_tmp("lbl", idx_labels("\x01"));
  const std::string many = write_tmp("many", idx_images(0xffffffffu, 28, 28, "abc"));
  expect_error(
      [&] { gmlp::data::load_idx(many, labels); },
      {"failed to load '" + many + "': the header declares 4294967295 images, more than the limit of 10000000"});
  const std::string wide = write_tmp("wide", idx_images(1, 28, 5000, "abc"));
  expect_error([&] { gmlp::data::load_idx(wide, labels); },
               {"failed to load '" + wide + "'", "28x5000 images, expected each side in 1..4096"});
  const std::string empty = write_tmp("zero", idx_images(1, 0, 28, ""));
  expect_error([&] { gmlp::data::load_idx(empty, labels); }, {"0x28 images, expected each side in 1..4096"});
  // Within the count and side caps but claiming 10^7 * 4096^2 bytes: refused by the size cap.
  const std::string big = write_tmp("big", idx_images(10'000'000, 4096, 4096, "abc"));
  expect_error([&] { gmlp::data::load_idx(big, labels); },
               {"the header declares 167772160000000 bytes of data (10000000 images of 4096x4096), "
                "more than the limit of 805306368"});
  // Within every cap (100 MiB) but not in the raw file: refused from its size, before reading.
  const std::string raw = write_tmp("raw", idx_images(100, 1024, 1024, "abc"));
  expect_error([&] { gmlp::data::load_idx(raw, labels); },
               {"the data ends after 3 of the 104857600 bytes its header declares"});
}

TEST(Idx, BoundsTheWorkOfGzipInput) {
  // A gzip file of a few hundred bytes declaring 64 x 4096 x 4096 pixels (1 GiB, above the cap)
  // and one declaring 100 x 1024 x 1024 (within it, but more than deflate can make of the file's
  // bytes): both are refused from the header, before anything is inflated.
  const std::string labels = write_tmp("lbl", idx_labels("\x01"));
  const std::string huge = write_gz("huge.gz", idx_images(64, 4096, 4096, std::string(4096, '\0')));
  expect_error([&] { gmlp::data::load_idx(huge, labels); }, {"failed to load '" + huge +
                                                             "': the header declares 1073741824 bytes of data (64 "
                                                             "images of 4096x4096), more than the limit of 805306368"});
  const std::string lying = write_gz("lying.gz", idx_images(100, 1024, 1024, std::string(4096, '\0')));
  expect_error([&] { gmlp::data::load_idx(lying, labels); }, {"failed to load '" + lying +
                                                              "': the header declares 104857600 bytes of data (100 "
                                                              "images of 1024x1024), more than a gzip file of "});
  // A stream that inflates to more than the header says stops one byte past it.
  const std::string more = write_gz("more.gz", idx_images(1, 1, 1, std::string(1 << 20, '\0')));
  expect_error([&] { gmlp::data::load_idx(more, labels); },
               {"'" + more + "': the file has more data than the 1 bytes its header declares"});
}

TEST(Idx, RejectsCountMismatchAndTrailingData) {
  const std::string images = write_tmp("img", idx_images(2, 1, 1, "\x01\x02"));
  const std::string labels = write_tmp("lbl", idx_labels("\x01\x02\x03"));
  expect_error([&] { gmlp::data::load_idx(images, labels); },
               {"failed to load '" + labels + "': it holds 3 labels but '" + images + "' holds 2 images"});
  const std::string extra = write_tmp("extra", idx_images(2, 1, 1, "\x01\x02\x03"));
  expect_error([&] { gmlp::data::load_idx(extra, labels); },
               {"failed to load '" + extra + "': the file has more data than the 2 bytes its header declares"});
}

}  // namespace

namespace {
// Writes a size × size PNG of one gray level (channels 1) or one RGB colour (channels 3).
void write_flat_png(const std::string& path, int size, std::initializer_list<uint8_t> colour) {
  std::vector<uint8_t> hwc;
  for (int i = 0; i < size * size; ++i) hwc.insert(hwc.end(), colour);
  fs::create_directories(fs::path(path).parent_path());
  gmlp::img::write_png(path, size, size, int(colour.size()), hwc.data());
}
}  // namespace

// Classes are train's sub-folders in name order, images in file-name order within a class; each
// image is converted to the wanted channels and size; files that are not images are skipped.
TEST(ImageFolder, ReadsClassesAndImagesInNameOrder) {
  const std::string root = tmp_path("folder");
  write_flat_png(root + "/train/dog/b.png", 4, {200});
  write_flat_png(root + "/train/dog/a.PNG", 4, {10});
  write_flat_png(root + "/train/cat/z.png", 6, {255, 0, 0});  // RGB and another size
  gmlp::write_file_atomic(root + "/train/cat/notes.txt", "not an image");
  write_flat_png(root + "/test/dog/c.png", 4, {30});  // test has no cat folder: it may lack a class
  ASSERT_TRUE(gmlp::data::is_image_folder(root));

  const auto train = gmlp::data::load_images(root, "train", 1, 4);
  EXPECT_EQ(train.count, 3);
  EXPECT_EQ(train.classes, 2);
  EXPECT_EQ(train.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(train.labels, (std::vector<uint8_t>{0, 1, 1}));  // cat/z, dog/a, dog/b
  ASSERT_EQ(train.pixels.size(), 3u * 16);
  EXPECT_EQ(train.pixels[0], 76);   // red as luma: 0.299 · 255, rounded
  EXPECT_EQ(train.pixels[16], 10);  // dog/a.PNG: the extension's case does not matter
  EXPECT_EQ(train.pixels[47], 200);

  const auto test = gmlp::data::load_images(root, "test", 3, 2);  // RGB, downsized
  EXPECT_EQ(test.count, 1);
  EXPECT_EQ(test.classes, 2);  // the test split uses train's class ids
  EXPECT_EQ(test.labels, (std::vector<uint8_t>{1}));
  EXPECT_EQ(test.pixels, std::vector<uint8_t>(12, 30));
}

// Read on demand, a folder holds no pixels: each image is decoded when it is asked for, to the
// bytes the folder read at load holds, and an image that cannot be decoded fails only then,
// naming its file.
TEST(ImageFolder, ReadOnDemandDecodesEachImageWhenAskedTheBytesOfReadingAtLoad) {
  const std::string root = tmp_path("folder");
  write_flat_png(root + "/train/dog/b.png", 4, {200});
  write_flat_png(root + "/train/dog/a.png", 5, {10, 90, 250});
  write_flat_png(root + "/train/cat/z.png", 6, {255, 0, 0});
  const auto at_load = gmlp::data::load_image_folder(root, "train", 3, 4);
  const auto on_demand = gmlp::data::load_image_folder(root, "train", 3, 4, gmlp::data::Reading::on_demand);
  EXPECT_TRUE(on_demand.pixels.empty());
  EXPECT_EQ(on_demand.count, 3);
  EXPECT_EQ(on_demand.labels, at_load.labels);
  EXPECT_EQ(on_demand.class_names, at_load.class_names);
  std::vector<uint8_t> scratch(size_t(on_demand.image_size()));
  for (int i = 0; i < 3; ++i) {
    const uint8_t* got = on_demand.image(i, scratch.data());
    EXPECT_EQ(std::vector<uint8_t>(got, got + 48),
              std::vector<uint8_t>(at_load.pixels.begin() + i * 48, at_load.pixels.begin() + (i + 1) * 48))
        << "image " << i;
  }
  gmlp::write_file_atomic(root + "/train/dog/c.jpg", "\xff\xd8 truncated");
  const auto late = gmlp::data::load_image_folder(root, "train", 3, 4, gmlp::data::Reading::on_demand);
  ASSERT_EQ(late.count, 4);
  late.image(0, scratch.data());  // the others still read
  expect_error([&] { late.image(3, scratch.data()); }, {"failed to load image '" + root + "/train/dog/c.jpg'"});
  // In a parallel loop the error comes out of it, once every image has been tried.
  std::vector<uint8_t> batch(size_t(4 * late.image_size()));
  int seen = 0;
  expect_error(
      [&] {
        gmlp::data::for_each_image(
            late, 4, [](int64_t k) { return 3 - k; }, batch.data(),
            [&](int64_t, const uint8_t*) {
#pragma omp atomic
              ++seen;
            });
      },
      {"c.jpg'"});
  EXPECT_EQ(seen, 3);
}

TEST(ImageFolder, RejectsWhatItCannotRead) {
  const std::string root = tmp_path("folder");
  write_flat_png(root + "/train/a/1.png", 4, {1});
  expect_error([&] { gmlp::data::load_image_folder(root, "test", 1, 4); }, {"'" + root + "/test' is not a directory"});
  write_flat_png(root + "/test/b/1.png", 4, {1});
  expect_error([&] { gmlp::data::load_image_folder(root, "test", 1, 4); },
               {"class 'b' is not a class of '" + root + "/train'"});
  fs::remove_all(root + "/test/b");
  expect_error([&] { gmlp::data::load_image_folder(root, "test", 1, 4); },
               {"'" + root + "/test': no .png, .jpg or .jpeg images"});
  fs::create_directories(root + "/test/a");  // an empty class folder is named
  expect_error([&] { gmlp::data::load_image_folder(root, "test", 1, 4); },
               {"class folder '" + root + "/test/a' has no .png, .jpg or .jpeg images"});
  gmlp::write_file_atomic(root + "/test/a/2.jpg", "\xff\xd8 truncated");
  expect_error([&] { gmlp::data::load_image_folder(root, "test", 1, 4); },
               {"failed to load image '" + root + "/test/a/2.jpg'", "cannot decode"});
  // Not an image folder: the IDX reader answers, naming its files.
  const std::string idx_dir = tmp_path("no-train");
  fs::create_directories(idx_dir);
  EXPECT_FALSE(gmlp::data::is_image_folder(idx_dir));
  expect_error([&] { gmlp::data::load_images(idx_dir, "train", 1, 28); },
               {"train-labels-idx1-ubyte' exists", "an image folder would have a train/ folder"});
}

namespace {
// A CIFAR-10 binary batch: one record per label, image bytes (i + 7·p) for record i, byte p.
std::string cifar_batch(std::initializer_list<uint8_t> labels) {
  std::string out;
  int i = 0;
  for (uint8_t l : labels) {
    out.push_back(char(l));
    for (int p = 0; p < 3072; ++p) out.push_back(char(uint8_t(i + 7 * p)));
    ++i;
  }
  return out;
}
}  // namespace

// The five data batches make the training split in order, the record's bytes are the image in
// CHW order as they stand, and batches.meta.txt names the classes.
TEST(Cifar10, ReadsTheBinaryBatches) {
  const std::string dir = tmp_path("cifar");
  fs::create_directories(dir);
  for (int b = 1; b <= 5; ++b)
    gmlp::write_file_atomic(dir + "/data_batch_" + std::to_string(b) + ".bin", cifar_batch({uint8_t(b), 0}));
  gmlp::write_file_atomic(dir + "/test_batch.bin", cifar_batch({9}));
  ASSERT_TRUE(gmlp::data::is_cifar10(dir));
  const auto train = gmlp::data::load_images(dir, "train", 1, 28);  // not converted: CIFAR's own
  EXPECT_EQ(train.count, 10);
  EXPECT_EQ(train.channels, 3);
  EXPECT_EQ(train.height, 32);
  EXPECT_EQ(train.labels, (std::vector<uint8_t>{1, 0, 2, 0, 3, 0, 4, 0, 5, 0}));
  ASSERT_EQ(train.pixels.size(), 10u * 3072);
  EXPECT_EQ(train.pixels[3072 + 1024], uint8_t(1 + 7 * 1024));  // record 1, green plane's first
  EXPECT_EQ(train.class_names.front(), "airplane");
  gmlp::write_file_atomic(dir + "/batches.meta.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n\n");
  const auto test = gmlp::data::load_cifar10(dir, "test");
  EXPECT_EQ(test.count, 1);
  EXPECT_EQ(test.labels, (std::vector<uint8_t>{9}));
  EXPECT_EQ(test.class_names.back(), "j");
}

TEST(Cifar10, RejectsBadBatches) {
  const std::string dir = tmp_path("cifar");
  fs::create_directories(dir);
  gmlp::write_file_atomic(dir + "/test_batch.bin", cifar_batch({3}).substr(0, 3000));
  expect_error([&] { gmlp::data::load_cifar10(dir, "test"); },
               {"'" + dir + "/test_batch.bin'", "3000 bytes is not a whole number of 3073-byte records"});
  gmlp::write_file_atomic(dir + "/test_batch.bin", cifar_batch({3, 10}));
  expect_error([&] { gmlp::data::load_cifar10(dir, "test"); }, {"label 10 of record 1 is out of range"});
  expect_error([&] { gmlp::data::load_cifar10(dir, "train"); }, {"'" + dir + "/data_batch_1.bin' does not exist"});
  expect_error([&] { gmlp::data::load_cifar10(dir, "val"); }, {"unknown split 'val'"});
}

TEST(Cifar10, ChecksSizesBeforeReading) {
  // Sparse files: a 1 GiB - 1 byte batch (not whole records) and a 1 GiB class-name file are
  // refused from their sizes; neither is read into memory.
  const std::string dir = tmp_path("cifar");
  fs::create_directories(dir);
  const std::string batch = dir + "/test_batch.bin";
  gmlp::write_file_atomic(batch, "");
  fs::resize_file(batch, (uintmax_t{1} << 30) - 1);
  expect_error([&] { gmlp::data::load_cifar10(dir, "test"); },
               {"'" + batch + "': 1073741823 bytes is not a whole number of 3073-byte records"});
  gmlp::write_file_atomic(batch, cifar_batch({3}));
  const std::string meta = dir + "/batches.meta.txt";
  gmlp::write_file_atomic(meta, "");
  fs::resize_file(meta, uintmax_t{1} << 30);
  expect_error([&] { gmlp::data::load_cifar10(dir, "test"); },
               {"'" + meta + "': the file is 1073741824 bytes, larger than the limit of 65536 bytes"});
}
