// core/npz.h against numpy: files numpy wrote, and numpy reading what
// WriteNpz wrote (it needs Python and the zoo, hence the runtime test).
#include "core/npz.h"

#include <cstring>
#include <random>

#include "core/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/testing/zoo.h"

namespace maitre::runtime {
namespace {

using ::testing::HasSubstr;

Tensor MakeTensor(std::string name, DataType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  size_t bytes = static_cast<size_t>(t.NumElements()) * DataTypeSize(dtype);
  for (size_t i = 0; i < bytes; ++i) t.data.push_back(static_cast<char>(i * 7 + 3));
  return t;
}

std::vector<Tensor> SampleArrays() {
  return {MakeTensor("f32", DataType::kFp32, {2, 3}),
          MakeTensor("f64", DataType::kFp64, {1, 1, 1}),
          MakeTensor("f16", DataType::kFp16, {5}),
          MakeTensor("i8", DataType::kInt8, {3, 1}),
          MakeTensor("i16", DataType::kInt16, {2}),
          MakeTensor("i32", DataType::kInt32, {4}),
          MakeTensor("i64", DataType::kInt64, {4}),
          MakeTensor("u8", DataType::kUint8, {0, 5}),
          MakeTensor("u16", DataType::kUint16, {3}),
          MakeTensor("u32", DataType::kUint32, {3}),
          MakeTensor("u64", DataType::kUint64, {1}),
          MakeTensor("flag", DataType::kBool, {})};
}

void ExpectSameArrays(const std::vector<Tensor>& want,
                      const std::map<std::string, Tensor>& got) {
  ASSERT_EQ(got.size(), want.size());
  for (const Tensor& w : want) {
    auto it = got.find(w.name);
    ASSERT_NE(it, got.end()) << w.name;
    EXPECT_EQ(it->second.name, w.name);
    EXPECT_EQ(it->second.dtype, w.dtype) << w.name;
    EXPECT_EQ(it->second.shape, w.shape) << w.name;
    EXPECT_EQ(it->second.data, w.data) << w.name;
  }
}

TEST(NpzTest, RoundTripsEveryDtype) {
  std::vector<Tensor> arrays = SampleArrays();
  absl::StatusOr<std::map<std::string, Tensor>> parsed = ParseNpz(WriteNpz(arrays));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSameArrays(arrays, *parsed);
}

TEST(NpzTest, RoundTripsWithZip64Records) {
  std::vector<Tensor> arrays = SampleArrays();
  std::string bytes = WriteNpz(arrays, NpzWriteOptions{/*force_zip64=*/true});
  EXPECT_NE(bytes, WriteNpz(arrays));
  absl::StatusOr<std::map<std::string, Tensor>> parsed = ParseNpz(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSameArrays(arrays, *parsed);
}

TEST(NpzTest, NpyDataStartsOnA64ByteBoundary) {
  std::string npy = WriteNpy(MakeTensor("x", DataType::kFp32, {3, 4}));
  EXPECT_EQ((npy.size() - 48) % 64, 0u);
  EXPECT_EQ(npy.substr(0, 6), "\x93NUMPY");
}

TEST(NpzTest, InvalidTensorIsWrittenAsRawBytes) {
  Tensor bad = MakeTensor("bad", DataType::kFp32, {2});
  bad.data.push_back('x');  // 9 bytes for 2 floats
  absl::StatusOr<std::map<std::string, Tensor>> parsed = ParseNpz(WriteNpz({bad}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->at("bad").dtype, DataType::kUint8);
  EXPECT_EQ(parsed->at("bad").data, bad.data);
}

// numpy reads what we write, and we read what numpy writes (np.savez uses
// zip64 local headers; savez_compressed deflates).
TEST(NpzTest, InteroperatesWithNumpy) {
  testing::ScopedTempDir scratch;
  const std::string& dir = scratch.path();
  ASSERT_TRUE(WriteFileAtomically(dir + "/ours.npz", WriteNpz(SampleArrays())).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/ours64.npz",
                                  WriteNpz(SampleArrays(), NpzWriteOptions{true}))
                  .ok());
  absl::Status s = testing::RunPython(dir, R"py(
import numpy as np
z = np.load('ours.npz')
assert z['f32'].dtype == np.float32 and z['f32'].shape == (2, 3), z['f32']
assert z['i64'].dtype == np.int64 and z['i64'].shape == (4,)
assert z['u8'].shape == (0, 5) and z['flag'].shape == () and z['flag'].dtype == np.bool_
raw = bytes((i * 7 + 3) % 256 for i in range(24))
assert z['f32'].tobytes() == raw, (z['f32'].tobytes(), raw)
z64 = np.load('ours64.npz')
assert sorted(z64.files) == sorted(z.files)
assert all(z64[k].tobytes() == z[k].tobytes() for k in z.files)
x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
np.savez('numpy.npz', x=x, labels=np.array([3, 1, 4], dtype=np.int64),
         b=np.array([True, False]), h=np.arange(3, dtype=np.float16))
np.savez_compressed('compressed.npz', x=x)
np.savez('fortran.npz', x=np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
np.savez('bigendian.npz', x=np.arange(3, dtype='>i4'))
np.savez('complex.npz', x=np.zeros(2, dtype=np.complex64))
open('x.bin', 'wb').write(x.tobytes())
)py");
  ASSERT_TRUE(s.ok()) << s;

  absl::StatusOr<std::string> bytes = ReadFileToString(dir + "/numpy.npz");
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<std::map<std::string, Tensor>> parsed = ParseNpz(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Tensor& x = parsed->at("x");
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DataType::kFp32);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(x.data, *ReadFileToString(dir + "/x.bin"));
  EXPECT_EQ(parsed->at("labels").dtype, DataType::kInt64);
  EXPECT_EQ(parsed->at("labels").As<int64_t>()[2], 4);
  EXPECT_EQ(parsed->at("b").dtype, DataType::kBool);
  EXPECT_EQ(parsed->at("h").dtype, DataType::kFp16);

  auto error_of = [&](const std::string& file) {
    absl::StatusOr<std::string> b = ReadFileToString(dir + "/" + file);
    EXPECT_TRUE(b.ok()) << file;
    return ParseNpz(b.ok() ? *b : "").status();
  };
  absl::Status compressed = error_of("compressed.npz");
  EXPECT_EQ(compressed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(compressed.message(), HasSubstr("save with np.savez, not savez_compressed"));
  EXPECT_THAT(error_of("fortran.npz").message(), HasSubstr("Fortran order"));
  EXPECT_THAT(error_of("bigendian.npz").message(), HasSubstr("big-endian"));
  EXPECT_THAT(error_of("complex.npz").message(), HasSubstr("not supported"));
}

TEST(NpzTest, RefusesNonZipInput) {
  for (absl::string_view junk : {absl::string_view(""), absl::string_view("hello world\n"),
                                 absl::string_view("PK\x03\x04 not really a zip")}) {
    absl::Status s = ParseNpz(junk).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << junk;
    EXPECT_THAT(s.message(), HasSubstr("not a valid .npz")) << junk;
  }
}

// Every prefix of a valid file is a truncated file: each must be refused
// cleanly (never read past the buffer, never crash).
TEST(NpzTest, EveryTruncationIsRefused) {
  std::string bytes = WriteNpz({MakeTensor("a", DataType::kFp32, {3, 2}),
                                MakeTensor("b", DataType::kInt64, {2})});
  for (size_t n = 0; n < bytes.size(); ++n) {
    // A copy so that reading past the prefix would be a real overrun.
    std::string prefix = bytes.substr(0, n);
    EXPECT_FALSE(ParseNpz(prefix).ok()) << "prefix of " << n << " bytes parsed";
  }
}

// Single corrupted bytes anywhere must give a clean result either way.
TEST(NpzTest, CorruptedBytesNeverCrash) {
  std::string bytes = WriteNpz({MakeTensor("a", DataType::kFp32, {3, 2})},
                               NpzWriteOptions{/*force_zip64=*/true});
  std::mt19937 rng(7);
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int k = 0; k < 4; ++k) {
      std::string copy = bytes;
      copy[i] = static_cast<char>(rng());
      absl::StatusOr<std::map<std::string, Tensor>> parsed = ParseNpz(copy);
      if (parsed.ok()) {
        for (const auto& [name, t] : *parsed) EXPECT_TRUE(t.Validate().ok());
      }
    }
  }
}

size_t FindSignature(const std::string& bytes, uint32_t sig) {
  char le[4] = {static_cast<char>(sig & 0xFF), static_cast<char>((sig >> 8) & 0xFF),
                static_cast<char>((sig >> 16) & 0xFF), static_cast<char>(sig >> 24)};
  return bytes.find(std::string(le, 4));
}

void Patch32(std::string* bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*bytes)[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

TEST(NpzTest, RefusesHugeDeclaredSizes) {
  const std::string good = WriteNpz({MakeTensor("a", DataType::kFp32, {3, 2})});
  const size_t central = FindSignature(good, 0x02014b50);
  const size_t end = FindSignature(good, 0x06054b50);
  ASSERT_NE(central, std::string::npos);
  ASSERT_NE(end, std::string::npos);

  std::string sizes = good;
  Patch32(&sizes, central + 20, 0x7FFFFFF0);
  Patch32(&sizes, central + 24, 0x7FFFFFF0);
  EXPECT_THAT(ParseNpz(sizes).status().message(), HasSubstr("truncated"));

  std::string offset = good;
  Patch32(&offset, central + 42, 0x7FFFFFF0);
  EXPECT_THAT(ParseNpz(offset).status().message(), HasSubstr("local header"));

  std::string count = good;
  count[end + 10] = '\xFE';
  count[end + 11] = '\xFF';
  EXPECT_THAT(ParseNpz(count).status().message(), HasSubstr("more entries"));

  std::string directory = good;
  Patch32(&directory, end + 12, 0xFFFFFF00);
  EXPECT_THAT(ParseNpz(directory).status().message(), HasSubstr("outside the file"));

  std::string deflated = good;  // method 8 in both headers
  deflated[central + 10] = 8;
  deflated[FindSignature(good, 0x04034b50) + 8] = 8;
  EXPECT_THAT(ParseNpz(deflated).status().message(), HasSubstr("not savez_compressed"));

  std::string crc = good;
  Patch32(&crc, central + 16, 0x12345678);
  EXPECT_THAT(ParseNpz(crc).status().message(), HasSubstr("CRC"));
}

std::string NpyWithHeader(const std::string& dict, const std::string& data) {
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(dict.size() & 0xFF));
  out.push_back(static_cast<char>(dict.size() >> 8));
  return out + dict + data;
}

TEST(NpyTest, RefusesBadHeaders) {
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
  const std::vector<Case> cases = {
      {"NUMPY\x01\x00\x10\x00{}", "wrong magic"},
      {std::string("\x93NUMPY\x07\x00\x10\x00", 10), "version 7"},
      {std::string("\x93NUMPY\x01\x00\xFF\xFF{}", 12), "truncated .npy header"},
      {NpyWithHeader(f4 + "(4611686018427387904, 4), }", std::string(16, '\0')),
       "needs 9223372036854775807 elements"},
      {NpyWithHeader(f4 + "(99999999999999999999,), }", ""), "too large"},
      {NpyWithHeader(f4 + "(3,), }", std::string(8, '\0')), "holds 2"},
      {NpyWithHeader(f4 + "(-3,), }", ""), "non-negative"},
      {NpyWithHeader("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                     ""),
       "structured"},
      {NpyWithHeader("{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0')),
       "needs 'descr', 'fortran_order' and 'shape'"},
      {NpyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
                     std::string(4, '\0')),
       "expected ',' or '}'"},
      {NpyWithHeader("{'descr': '<f4, 'fortran_order'", ""), "bad .npy header"},
      {NpyWithHeader("{'descr': '<U8', 'fortran_order': False, 'shape': (1,), }",
                     std::string(32, '\0')),
       "not supported"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseNpy(c.bytes, "arr").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << s.message();
  }
}

TEST(NpyTest, ReadsOldStyleHeaders) {
  absl::StatusOr<Tensor> t = ParseNpy(
      NpyWithHeader("{'descr':'<i8','fortran_order':False,'shape':(2L,)}",
                    std::string(16, '\1')),
      "old");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape, std::vector<int64_t>{2});
  EXPECT_EQ(t->dtype, DataType::kInt64);
}

TEST(NpzTest, ReadsTheZooValset) {
  absl::StatusOr<std::string> dir = testing::ZooDir();
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<std::string> bytes = ReadFileToString(*dir + "/valset.npz");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::map<std::string, Tensor>> parsed = ParseNpz(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->at("inputs").shape, (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(parsed->at("labels").dtype, DataType::kInt64);
}

}  // namespace
}  // namespace maitre::runtime
