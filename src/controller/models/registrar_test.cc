// The registration progress a client polls (the registry-backed steps are
// covered end to end in tests/e2e_variants_test.cc).
#include "controller/models/registrar.h"

#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

TEST(RegistrarProgressTest, AQueuedRegistrationIsVisibleAndReplacesTheLastOnesEnd) {
  Registrar registrar(Registrar::Options{});
  Upload upload;
  upload.app = "fashion";
  upload.model = "fmnist-mlp";
  EXPECT_TRUE(absl::IsNotFound(registrar.Progress("fashion", "fmnist-mlp").status()));

  // A registration that fails on the upload itself, before any registry work.
  EXPECT_TRUE(absl::IsInvalidArgument(registrar.Register(upload).status()));
  auto finished = registrar.Progress("fashion", "fmnist-mlp");
  ASSERT_TRUE(finished.ok());
  EXPECT_TRUE(finished->done);
  EXPECT_FALSE(finished->error.ok());

  // The next upload is queued: a client polling now sees it waiting, not the
  // previous failure (which it would take for its own answer).
  registrar.Queued(upload);
  auto queued = registrar.Progress("fashion", "fmnist-mlp");
  ASSERT_TRUE(queued.ok());
  EXPECT_FALSE(queued->done);
  EXPECT_TRUE(queued->error.ok());
  EXPECT_EQ(queued->step, 0);
  EXPECT_TRUE(absl::IsNotFound(registrar.Progress("fashion", "fmnist-cnn").status()));
}

}  // namespace
}  // namespace maitre::controller
