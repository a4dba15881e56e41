#include "controller/registry/blob_store.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "controller/registry/registry_test_util.h"
#include "core/file_util.h"
#include "core/sha256.h"
#include "gtest/gtest.h"

namespace maitre::registry {
namespace {

using test_util::TempDir;

// Regular files under `dir`, recursively.
int CountFiles(const std::string& dir) {
  int n = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) ++n;
  }
  return n;
}

std::unique_ptr<BlobStore> OpenStore(const std::string& dir, bool verify = true) {
  auto store = BlobStore::Open({dir, verify});
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

TEST(BlobStoreTest, PutThenReadReturnsTheBytesUnderTheirHash) {
  TempDir tmp;
  auto store = OpenStore(tmp.File("blobs"));
  std::string bytes("model\0bytes\xff\x01", 14);  // binary, with a NUL inside
  auto hash = store->Put(bytes);
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_EQ(*hash, Sha256Hex(bytes));
  EXPECT_TRUE(store->Has(*hash));
  auto read = store->Read(*hash);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
  auto size = store->Size(*hash);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 14);
}

TEST(BlobStoreTest, RemoveDeletesTheFileAndOnlyIt) {
  TempDir tmp;
  auto store = OpenStore(tmp.File("blobs"));
  auto gone = store->Put("gone");
  auto kept = store->Put("kept");
  ASSERT_TRUE(gone.ok() && kept.ok());
  ASSERT_TRUE(store->Remove(*gone).ok());
  EXPECT_FALSE(store->Has(*gone));
  EXPECT_TRUE(absl::IsNotFound(store->Read(*gone).status()));
  EXPECT_TRUE(store->Has(*kept));
  EXPECT_EQ(CountFiles(tmp.File("blobs")), 1);
  EXPECT_TRUE(store->Remove(*gone).ok()) << "removing an absent blob is not an error";
  EXPECT_TRUE(absl::IsInvalidArgument(store->Remove("../../etc/passwd")));
}

TEST(BlobStoreTest, PathFansOutByTheFirstTwoHexDigits) {
  TempDir tmp;
  auto store = OpenStore(tmp.File("blobs"));
  auto hash = store->Put("abc");
  ASSERT_TRUE(hash.ok());
  std::string expected = tmp.File("blobs") + "/" + hash->substr(0, 2) + "/" + *hash;
  EXPECT_EQ(store->PathOf(*hash), expected);
  EXPECT_TRUE(std::filesystem::is_regular_file(expected));
}

TEST(BlobStoreTest, EmptyBytesAreABlobToo) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  auto hash = store->Put("");
  ASSERT_TRUE(hash.ok());
  EXPECT_EQ(*hash, Sha256Hex(""));
  EXPECT_EQ(*store->Read(*hash), "");
  EXPECT_EQ(*store->Size(*hash), 0);
}

TEST(BlobStoreTest, SameBytesAreStoredOnceAndNotRewritten) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  auto first = store->Put("the same model");
  ASSERT_TRUE(first.ok());
  // Age the file: a rewrite would give it a fresh modification time.
  std::string path = store->PathOf(*first);
  auto old_time = std::filesystem::file_time_type::clock::now() - std::chrono::hours(24);
  std::filesystem::last_write_time(path, old_time);

  auto second = store->Put("the same model");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(CountFiles(tmp.path()), 1);
  EXPECT_EQ(std::filesystem::last_write_time(path), old_time);

  auto other = store->Put("another model");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *first);
  EXPECT_EQ(CountFiles(tmp.path()), 2);
}

TEST(BlobStoreTest, MalformedHashesAreRejectedBeforeTouchingTheFilesystem) {
  TempDir tmp;
  auto store = OpenStore(tmp.File("blobs"));
  // A real blob, so that a traversal that escaped the checks could find it.
  std::string good = *store->Put("x");
  std::vector<std::string> bad = {
      "",
      "abc",
      good.substr(1),               // 63 characters
      good + "0",                   // 65 characters
      absl::AsciiStrToUpper(good),  // uppercase hex
      std::string(62, 'a') + "/.",  // a path separator
      "../" + good.substr(3),       // traversal, right length
      std::string(64, 'g'),         // not hex
      std::string(63, 'a') + std::string(1, '\0'),
  };
  for (const std::string& hash : bad) {
    SCOPED_TRACE(hash);
    EXPECT_FALSE(BlobStore::IsValidHash(hash));
    EXPECT_EQ(store->Read(hash).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(store->Size(hash).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(store->Has(hash));
    EXPECT_EQ(store->PathOf(hash), "");
  }
  EXPECT_TRUE(BlobStore::IsValidHash(good));
}

TEST(BlobStoreTest, UnknownHashIsNotFound) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  std::string hash = Sha256Hex("never stored");
  EXPECT_FALSE(store->Has(hash));
  EXPECT_EQ(store->Read(hash).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->Size(hash).status().code(), absl::StatusCode::kNotFound);
}

TEST(BlobStoreTest, DamagedFileIsDataLossWhenVerifying) {
  TempDir tmp;
  std::string hash;
  {
    auto store = OpenStore(tmp.path());
    hash = *store->Put("original bytes");
    // Same size, different content: only re-hashing notices.
    ASSERT_TRUE(WriteFileAtomically(store->PathOf(hash), "tampered bytes").ok());
    EXPECT_EQ(store->Read(hash).status().code(), absl::StatusCode::kDataLoss);
  }
  auto unverified = OpenStore(tmp.path(), /*verify=*/false);
  EXPECT_EQ(*unverified->Read(hash), "tampered bytes");
}

TEST(BlobStoreTest, PutRepairsATruncatedFile) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  std::string hash = *store->Put("complete contents");
  ASSERT_TRUE(WriteFileAtomically(store->PathOf(hash), "compl").ok());
  ASSERT_TRUE(store->Put("complete contents").ok());
  EXPECT_EQ(*store->Read(hash), "complete contents");
}

TEST(BlobStoreTest, ReopeningTheDirectorySeesEarlierBlobs) {
  TempDir tmp;
  std::string hash;
  {
    auto store = OpenStore(tmp.File("a/b/c"));  // nested dirs are created
    hash = *store->Put("persisted");
  }
  auto store = OpenStore(tmp.File("a/b/c"));
  EXPECT_TRUE(store->Has(hash));
  EXPECT_EQ(*store->Read(hash), "persisted");
}

TEST(BlobStoreTest, OpenNeedsADirectory) {
  EXPECT_EQ(BlobStore::Open({""}).status().code(), absl::StatusCode::kInvalidArgument);
  TempDir tmp;
  ASSERT_TRUE(WriteFileAtomically(tmp.File("file"), "x").ok());
  EXPECT_FALSE(BlobStore::Open({tmp.File("file")}).ok());  // a file, not a dir
}

TEST(BlobStoreTest, ConcurrentPutsOfSameAndDifferentBytes) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::string shared(4096, static_cast<char>('a' + i % 26));
        EXPECT_TRUE(store->Put(shared).ok());
        EXPECT_TRUE(store->Put("thread " + std::to_string(t) + " blob " + std::to_string(i)).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < kPerThread; ++i) {
    std::string shared(4096, static_cast<char>('a' + i % 26));
    EXPECT_EQ(*store->Read(Sha256Hex(shared)), shared);
  }
  // 20 distinct shared blobs + one per (thread, i); no temporary files left.
  EXPECT_EQ(CountFiles(tmp.path()), kPerThread + kThreads * kPerThread);
}

}  // namespace
}  // namespace maitre::registry
