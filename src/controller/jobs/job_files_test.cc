#include "controller/jobs/job_files.h"

#include <cmath>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file_util.h"
#include "core/npz.h"
#include "runtime/testing/zoo.h"

namespace maitre::jobs {
namespace {

using runtime::testing::ScopedTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
Tensor Make(const std::string& name, DataType dtype, std::vector<int64_t> shape,
            const std::vector<T>& values) {
  Tensor t{name, dtype, std::move(shape), {}};
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  return t;
}

Tensor Floats(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
  return Make(name, DataType::kFp32, std::move(shape), v);
}

Tensor Int64s(const std::string& name, const std::vector<int64_t>& v) {
  return Make(name, DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
}

void WriteNpzFile(const std::string& path, const std::vector<Tensor>& arrays) {
  ASSERT_TRUE(WriteFileAtomically(path, WriteNpz(arrays)).ok());
}

TEST(ListInputFilesTest, AFileOrTheNpzFilesOfADirectoryInNameOrder) {
  ScopedTempDir dir;
  std::string in = dir.path() + "/in";
  ASSERT_TRUE(MakeDirectories(in + "/nested").ok());
  for (const char* name : {"b.npz", "a.npz", "notes.txt", "nested/c.npz"}) {
    ASSERT_TRUE(WriteFileAtomically(in + "/" + name, "x").ok());
  }
  auto files = ListInputFiles(in);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(in + "/a.npz", in + "/b.npz"));
  EXPECT_THAT(*ListInputFiles(in + "/b.npz"), ElementsAre(in + "/b.npz"));
}

TEST(ListInputFilesTest, ClearErrors) {
  ScopedTempDir dir;
  auto missing = ListInputFiles(dir.path() + "/nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("does not exist"));
  EXPECT_THAT(ListInputFiles(dir.path()).status().message(), HasSubstr("holds no .npz files"));
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/x.csv", "1,2").ok());
  EXPECT_THAT(ListInputFiles(dir.path() + "/x.csv").status().message(),
              HasSubstr("not a .npz file"));
}

TEST(ReadInputFileTest, InputsAndLabels) {
  ScopedTempDir dir;
  std::string path = dir.path() + "/a.npz";
  WriteNpzFile(path, {Floats("inputs", {3, 2}, {1, 2, 3, 4, 5, 6}), Int64s("labels", {0, 1, 0})});
  auto file = ReadInputFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->rows, 3);
  ASSERT_EQ(file->inputs.size(), 1u);
  // Unnamed: the model's only input, whatever its name (ModelSpec::CheckInputs).
  EXPECT_EQ(file->inputs[0].name, "");
  ASSERT_TRUE(file->labels.has_value());
  EXPECT_EQ(file->labels->As<int64_t>()[1], 1);

  ModelSpec spec;
  spec.inputs.push_back({"input", DataType::kFp32, {-1, 2}});
  EXPECT_TRUE(CheckInputsFit(*file, spec).ok());
  spec.inputs[0].shape = {-1, 3};
  EXPECT_FALSE(CheckInputsFit(*file, spec).ok());
}

TEST(ReadInputFileTest, ArraysNamedAfterAModelsInputs) {
  ScopedTempDir dir;
  std::string path = dir.path() + "/a.npz";
  WriteNpzFile(path, {Floats("image", {2, 1}, {1, 2}), Floats("mask", {2, 1}, {0, 1})});
  auto file = ReadInputFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->inputs.size(), 2u);
  EXPECT_FALSE(file->labels.has_value());
}

TEST(ReadInputFileTest, BadFilesNameTheProblem) {
  ScopedTempDir dir;
  std::string path = dir.path() + "/a.npz";
  ASSERT_TRUE(WriteFileAtomically(path, "not a zip").ok());
  EXPECT_THAT(ReadInputFile(path).status().message(), HasSubstr("not a usable .npz"));
  WriteNpzFile(path, {Int64s("labels", {1})});
  EXPECT_THAT(ReadInputFile(path).status().message(), HasSubstr("no arrays to send"));
  WriteNpzFile(path, {Floats("inputs", {2, 1}, {1, 2}), Int64s("labels", {1})});
  EXPECT_THAT(ReadInputFile(path).status().message(), HasSubstr("one label per row"));
  WriteNpzFile(path, {Floats("a", {2, 1}, {1, 2}), Floats("b", {1, 1}, {1})});
  EXPECT_THAT(ReadInputFile(path).status().message(), HasSubstr("different numbers of rows"));
  EXPECT_THAT(ReadInputFile(dir.path() + "/gone.npz").status().message(), HasSubstr("cannot read"));
  // A NaN or an infinity is refused before any row is sent (core/finite.h).
  WriteNpzFile(path, {Floats("inputs", {2, 2}, {1, 2, 3, NAN})});
  absl::Status nan = ReadInputFile(path).status();
  EXPECT_EQ(nan.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(nan.message(), HasSubstr("array \"inputs\" of " + path +
                                       ": element 1 of row 1 is NaN; inputs must be finite"));
  WriteNpzFile(path, {Floats("image", {1, 2}, {-INFINITY, 2}), Floats("mask", {1, 1}, {0})});
  EXPECT_THAT(ReadInputFile(path).status().message(),
              HasSubstr("array \"image\" of " + path + ": element 0 of row 0 is -Inf"));
}

TEST(SummariseChunkTest, PredictionsAndScoring) {
  Tensor labels = Int64s("labels", {1, 0, 2});
  auto chunk = SummariseChunk({Floats("logits", {3, 3}, {0, 5, 1, 9, 0, 0, 1, 1, 3})}, 3, &labels);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  ASSERT_EQ(chunk->arrays.size(), 3u);
  EXPECT_EQ(chunk->arrays[1].name, "predictions");
  const int64_t* p = chunk->arrays[1].As<int64_t>();
  EXPECT_EQ(p[0], 1);
  EXPECT_EQ(p[1], 0);
  EXPECT_EQ(p[2], 2);
  EXPECT_EQ(chunk->correct, 3);
  EXPECT_EQ(chunk->arrays[2].name, "labels");

  // Unlabelled: predictions but no score; wrong row counts are refused.
  auto unlabelled = SummariseChunk({Floats("logits", {1, 2}, {0, 1})}, 1, nullptr);
  ASSERT_TRUE(unlabelled.ok());
  EXPECT_EQ(unlabelled->arrays.size(), 2u);
  EXPECT_EQ(unlabelled->correct, 0);
  EXPECT_FALSE(SummariseChunk({Floats("logits", {1, 2}, {0, 1})}, 2, nullptr).ok());
  EXPECT_FALSE(SummariseChunk({}, 1, nullptr).ok());
}

TEST(ResultFilesTest, ChunksAreJoinedIntoOneResultAndRemoved) {
  ScopedTempDir dir;
  std::string staging = StagingDir(dir.path(), "job-000001");
  std::vector<std::string> chunks{ChunkPath(staging, 0, 0), ChunkPath(staging, 0, 2)};
  EXPECT_LT(chunks[0], chunks[1]);
  ASSERT_TRUE(
      WriteChunk(chunks[0], {Floats("logits", {2, 1}, {1, 2}), Int64s("predictions", {0, 0})})
          .ok());
  ASSERT_TRUE(
      WriteChunk(chunks[1], {Floats("logits", {1, 1}, {3}), Int64s("predictions", {0})}).ok());
  std::string result = ResultPath(dir.path(), "/somewhere/else/a.npz");
  EXPECT_EQ(result, dir.path() + "/a.npz");
  ASSERT_TRUE(AssembleResult(chunks, result).ok());
  auto arrays = ParseNpz(*ReadFileToString(result));
  ASSERT_TRUE(arrays.ok());
  EXPECT_EQ(arrays->at("logits").shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(arrays->at("logits").As<float>()[2], 3);
  EXPECT_EQ(arrays->at("predictions").shape, (std::vector<int64_t>{3}));
  EXPECT_FALSE(std::filesystem::exists(chunks[0]));
  // A missing chunk is an error, not a short result.
  EXPECT_THAT(AssembleResult(chunks, dir.path() + "/b.npz").message(), HasSubstr("missing"));
}

TEST(CheckWritableDirectoryTest, CreatesOrExplains) {
  ScopedTempDir dir;
  EXPECT_TRUE(CheckWritableDirectory(dir.path() + "/new/out").ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() + "/new/out"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() + "/new/out"));  // the probe is gone
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/file", "x").ok());
  EXPECT_THAT(CheckWritableDirectory(dir.path() + "/file").message(),
              HasSubstr("is not a directory"));
  auto under_file = CheckWritableDirectory(dir.path() + "/file/out");
  EXPECT_EQ(under_file.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(under_file.message(), HasSubstr("cannot create"));
}

}  // namespace
}  // namespace maitre::jobs
