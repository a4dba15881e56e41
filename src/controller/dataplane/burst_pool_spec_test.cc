// --burst-pool's spec: the defaults, overrides, and a clear error for each
// kind of bad pair.
#include "controller/dataplane/burst_pool_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

using ::testing::HasSubstr;

TEST(BurstPoolSpecTest, OnMeansTheDefaults) {
  auto o = ParseBurstPoolSpec("on");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->type.name, "burst");
  EXPECT_EQ(o->type.market, WorkerType::Market::kBurst);
  EXPECT_EQ(o->warm_workers, 1);
  EXPECT_EQ(o->max_workers, 2);
  EXPECT_DOUBLE_EQ(o->type.price_per_request, 4.31e-7);
}

TEST(BurstPoolSpecTest, PairsOverrideTheDefaults) {
  auto o = ParseBurstPoolSpec(
      "warm=0,max=3,concurrency=8,busy_at=2,keep_warm_s=30,cores=2,memory_mb=512,"
      "price_per_request=1e-6,price_per_hour=0.5");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->warm_workers, 0);
  EXPECT_EQ(o->max_workers, 3);
  EXPECT_EQ(o->concurrency, 8);
  EXPECT_EQ(o->busy_at, 2);
  EXPECT_EQ(o->keep_warm, 30 * kSecond);
  EXPECT_EQ(o->type.cores, 2);
  EXPECT_EQ(o->type.memory_mb, 512);
  EXPECT_DOUBLE_EQ(o->type.price_per_request, 1e-6);
  EXPECT_DOUBLE_EQ(o->type.price_per_hour, 0.5);
}

TEST(BurstPoolSpecTest, BadPairsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"size=3", "\"size=3\" has an unknown key"},
      {"warm", "\"warm\" is not key=value"},
      {"max=two", "\"max=two\" needs a whole number"},
      {"price_per_request=-1", "needs a finite number, 0 or more"},
      {"price_per_hour=nan", "needs a finite number"},
      {"memory_mb=0", "needs a whole number of MB"},
      {"warm=3,max=2", "at least warm"},
      {"concurrency=0", "must be 1 or more"},
      {"keep_warm_s=1e12", "at most a year"},
  };
  for (const auto& [spec, message] : cases) {
    auto o = ParseBurstPoolSpec(spec);
    ASSERT_FALSE(o.ok()) << spec;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_THAT(o.status().message(), HasSubstr(message)) << spec;
  }
}

}  // namespace
}  // namespace maitre::controller
