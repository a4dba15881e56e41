#include "core/variant.h"

#include <gtest/gtest.h>

#include "core/worker_type.h"

namespace maitre {
namespace {

TEST(VariantKeyTest, ParsesAtLastColon) {
  auto k = VariantKey::Parse("fmnist-cnn:torch-opt");
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->model, "fmnist-cnn");
  EXPECT_EQ(k->variant, "torch-opt");
  EXPECT_EQ(k->ToString(), "fmnist-cnn:torch-opt");
  EXPECT_FALSE(VariantKey::Parse("plain").has_value());
  EXPECT_FALSE(VariantKey::Parse(":x").has_value());
  EXPECT_FALSE(VariantKey::Parse("x:").has_value());
}

TEST(RequirementsTest, FallsBackToDefaults) {
  Requirements defaults{100.0, 0.8, std::nullopt};
  Requirements q{std::nullopt, 0.9, 1.0};
  Requirements r = q.Or(defaults);
  EXPECT_EQ(*r.latency_ms, 100.0);
  EXPECT_EQ(*r.min_accuracy, 0.9);
  EXPECT_EQ(*r.max_cost, 1.0);
}

TEST(WorkerTypeTableTest, DefaultAndParse) {
  WorkerTypeTable t = WorkerTypeTable::Default();
  ASSERT_NE(t.Find("cpu-2"), nullptr);
  EXPECT_EQ(t.Find("cpu-2")->cores, 2);
  EXPECT_DOUBLE_EQ(t.Find("cpu-2")->price_per_hour, 2 * t.Find("cpu-1")->price_per_hour);
  EXPECT_EQ(t.Find("gpu"), nullptr);
  auto parsed = WorkerTypeTable::Parse("a:1:100:0.5,b:4:800:2");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->types().size(), 2u);
  EXPECT_FALSE(WorkerTypeTable::Parse("a:1:100").ok());
  EXPECT_FALSE(WorkerTypeTable::Parse("a:0:100:1").ok());
  EXPECT_EQ(parsed->Find("a")->billing_unit, 0);  // by the second unless given
}

TEST(WorkerTypeTableTest, ParsesABillingUnit) {
  auto parsed = WorkerTypeTable::Parse("hourly:2:800:0.1:3600,minute:1:100:0.05:60");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Find("hourly")->billing_unit, 3600 * kSecond);
  EXPECT_EQ(parsed->Find("minute")->billing_unit, 60 * kSecond);
  EXPECT_FALSE(WorkerTypeTable::Parse("a:1:100:1:-5").ok());
  EXPECT_FALSE(WorkerTypeTable::Parse("a:1:100:1:soon").ok());
  EXPECT_FALSE(WorkerTypeTable::Parse("a:1:100:1:60:7").ok());
}

TEST(WorkerTypeTableTest, ParsesAMarket) {
  auto parsed = WorkerTypeTable::Parse("s:1:100:0.01:0:spot,o:1:100:0.04:60:on-demand,d:1:100:1");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Find("s")->market, WorkerType::Market::kSpot);
  EXPECT_EQ(parsed->Find("o")->market, WorkerType::Market::kOnDemand);
  EXPECT_EQ(parsed->Find("d")->market, WorkerType::Market::kOnDemand);
  EXPECT_STREQ(MarketName(parsed->Find("s")->market), "spot");
  auto bad = WorkerTypeTable::Parse("a:1:100:1:60:cheap");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("on-demand or spot"), std::string::npos);
  EXPECT_FALSE(WorkerTypeTable::Parse("a:1:100:1:60:spot:x").ok());
}

}  // namespace
}  // namespace maitre
