#include "core/file_util.h"

#include <gtest/gtest.h>

namespace maitre {
namespace {

TEST(FileUtilTest, WriteThenRead) {
  std::string dir = ::testing::TempDir() + "/file_util_test/a/b";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  std::string path = dir + "/f.bin";
  std::string data("x\0y", 3);
  ASSERT_TRUE(WriteFileAtomically(path, data).ok());
  auto read = ReadFileToString(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, data);
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(*ReadFileToString(path), "second");
  EXPECT_EQ(ReadFileToString(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace maitre
