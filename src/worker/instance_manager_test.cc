#include "worker/instance_manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "runtime/testing/zoo.h"

namespace maitre::worker {
namespace {

// Blobs from the zoo's files, by name.
class ZooFiles final : public BlobSource {
 public:
  absl::Status Fetch(const std::string& hash, const std::string& path) override {
    auto file = files.find(hash);
    if (file == files.end()) return absl::NotFoundError(hash);
    std::error_code error;
    std::filesystem::copy_file(file->second, path, error);
    return error ? absl::NotFoundError(error.message()) : absl::OkStatus();
  }
  std::map<std::string, std::string> files;
};

class InstanceManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto zoo = runtime::testing::LoadZoo();
    ASSERT_TRUE(zoo.ok()) << zoo.status();
    for (const auto& m : *zoo) {
      if (m.name == "fmnist-logreg") blobs_.files["logreg"] = m.torchscript;
    }
    ASSERT_EQ(blobs_.files.size(), 1u);
    spec_.blob = "logreg";
    spec_.key = {"fmnist-logreg", "torch"};
    spec_.spec = runtime::testing::FmnistSpec();
    InstanceManager::Options options;
    options.cache_dir = dir_.path();
    options.blobs = &blobs_;
    options.batching.policy = "timeout";  // plans without a profile
    options.batching.max_batch = 8;
    manager_ = std::make_unique<InstanceManager>(options);
  }

  int32_t MaxBatch() {
    std::shared_ptr<Instance> instance = manager_->Find(spec_.key);
    return instance == nullptr ? -1 : instance->max_batch();
  }

  runtime::testing::ScopedTempDir dir_;
  ZooFiles blobs_;
  VariantSpec spec_;
  std::unique_ptr<InstanceManager> manager_;
};

// A load's batch limit (a pipeline stage's planned batch) caps the
// instance below the worker's own, and each later load of the loaded
// instance sets it again: lower, back to the worker's, or above it (which
// the worker's limit still bounds).
TEST_F(InstanceManagerTest, ALoadsBatchLimitCapsTheInstanceAndALaterLoadResetsIt) {
  ASSERT_TRUE(manager_->Load(spec_, 1, {}, /*max_batch=*/2).ok());
  EXPECT_EQ(MaxBatch(), 2);
  ASSERT_TRUE(manager_->Load(spec_, 1, {}, /*max_batch=*/0).ok());
  EXPECT_EQ(MaxBatch(), 8);
  ASSERT_TRUE(manager_->Load(spec_, 2, {}, /*max_batch=*/4).ok());
  EXPECT_EQ(MaxBatch(), 4);
  EXPECT_EQ(manager_->Find(spec_.key)->replicas(), 2);
  ASSERT_TRUE(manager_->Load(spec_, 2, {}, /*max_batch=*/64).ok());
  EXPECT_EQ(MaxBatch(), 8);
}

// A profile that stops below the limit bounds it too: the policy plans
// only with batches that were measured.
TEST_F(InstanceManagerTest, TheProfilesLargestBatchBoundsTheLimit) {
  ASSERT_TRUE(manager_->Load(spec_, 1, {{1, 1, 1}, {2, 1.5, 2}, {4, 2, 3}}, 0).ok());
  EXPECT_EQ(MaxBatch(), 4);
  ASSERT_TRUE(manager_->Load(spec_, 1, {}, 3).ok());
  EXPECT_EQ(MaxBatch(), 3);
}

}  // namespace
}  // namespace maitre::worker
