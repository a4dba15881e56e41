#include "core/secret_token.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "core/file_util.h"

namespace maitre {
namespace {

TEST(SecretTokenTest, RandomTokensAreLongHexAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string token = RandomToken();
    EXPECT_EQ(token.size(), 64u);
    EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos);
    seen.insert(token);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(SecretTokenTest, OnlyTheSameNonEmptyTokenMatches) {
  EXPECT_TRUE(TokensMatch("abc123", "abc123"));
  EXPECT_FALSE(TokensMatch("abc124", "abc123"));
  EXPECT_FALSE(TokensMatch("abc12", "abc123"));
  EXPECT_FALSE(TokensMatch("", ""));  // no token configured admits nobody
}

TEST(SecretTokenTest, BearerValuesRoundTrip) {
  EXPECT_EQ(BearerToken(BearerValue("t0k")), "t0k");
  EXPECT_EQ(BearerToken("Basic dXNlcg=="), "");
  EXPECT_EQ(BearerToken(""), "");
}

class TokenFileTest : public ::testing::Test {
 protected:
  TokenFileTest() {
    std::string pattern = std::filesystem::temp_directory_path().string() + "/token-test-XXXXXX";
    dir_ = mkdtemp(pattern.data());
  }
  ~TokenFileTest() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TokenFileTest, IsMadeOnceOwnerOnlyAndReadBack) {
  const std::string path = dir_ + "/join-token";
  auto made = ReadOrCreateTokenFile(path);
  ASSERT_TRUE(made.ok()) << made.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = ReadOrCreateTokenFile(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *made);
  EXPECT_EQ(*ReadTokenFile(path), *made);
}

TEST_F(TokenFileTest, RefusesAFileOthersMayReadOrAShortToken) {
  const std::string open_file = dir_ + "/open";
  ASSERT_TRUE(WriteFileAtomically(open_file, RandomToken() + "\n").ok());
  chmod(open_file.c_str(), 0644);
  EXPECT_EQ(ReadTokenFile(open_file).status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string short_file = dir_ + "/short";
  ASSERT_TRUE(WriteFileAtomically(short_file, "abc\n").ok());
  chmod(short_file.c_str(), 0600);
  EXPECT_EQ(ReadTokenFile(short_file).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadTokenFile(dir_ + "/missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace maitre
