#include "policy/selection_index.h"

#include <gtest/gtest.h>

#include "policy/selection_testing.h"

namespace maitre::policy {
namespace {

using selection_testing::LinearProfile;

ServableVariant Var(std::string model, std::string variant, double accuracy,
                     std::vector<std::pair<std::string, Profile>> profiles) {
  ServableVariant v;
  v.key = {std::move(model), std::move(variant)};
  v.accuracy = accuracy;
  for (auto& [type, p] : profiles) v.profiles[type] = p;
  return v;
}

SelectionCatalogue Base() {
  SelectionCatalogue c;
  c.worker_types = {{"a", 1, 1000, 0.1}, {"b", 2, 2000, 0.2}};
  c.apps.push_back(
      {"app1",
       {Var("m1", "x", 0.9,
            {{"a", LinearProfile(5, 1, 100, 10)}, {"b", LinearProfile(2, 1, 100, 10)}}),
        Var("m1", "y", 0.8, {{"a", LinearProfile(1, 1, 10, 10)}}),
        Var("m2", "z", 0.7,
            {{"b", LinearProfile(1, 1, 10, 10)}, {"gone-type", LinearProfile(1, 1, 1, 1)}})}});
  c.apps.push_back({"app2", {Var("m3", "w", 0.95, {{"a", LinearProfile(3, 1, 50, 10)}})}});
  return c;
}

TEST(SelectionIndexTest, FlattensTheCatalogue) {
  SelectionIndex idx = *SelectionIndex::Create(Base());
  ASSERT_NE(idx.FindApp("app1"), kNoId);
  EXPECT_EQ(idx.FindApp("nope"), kNoId);
  const auto& app1 = idx.app(idx.FindApp("app1"));
  EXPECT_EQ(app1.models.size(), 2u);
  // x on a and b, y on a, z on b (the unknown type is ignored): 4 options.
  EXPECT_EQ(app1.cold_order.size(), 4u);
  for (size_t i = 1; i < app1.cold_order.size(); ++i) {
    EXPECT_LE(idx.option(app1.cold_order[i - 1]).cold_ms, idx.option(app1.cold_order[i]).cold_ms);
  }
  // Cold order: y@a (10 + 2), z@b (10 + 2, dearer), x@b (100 + 3), x@a (100 + 6).
  EXPECT_EQ(idx.OptionName(app1.cold_order[0]), "m1:y on a");
  EXPECT_EQ(idx.OptionName(app1.cold_order[1]), "m2:z on b");
  EXPECT_EQ(idx.OptionName(app1.cold_order[3]), "m1:x on a");
  const VariantId x = idx.FindVariant({"m1", "x"});
  const OptionId xb = idx.FindOption(x, idx.FindType("b"));
  ASSERT_NE(xb, kNoId);
  EXPECT_DOUBLE_EQ(idx.option(xb).price_per_hour, 0.2);
  EXPECT_DOUBLE_EQ(idx.option(xb).latency1_ms, 3);
  EXPECT_DOUBLE_EQ(idx.option(xb).cold_ms, 103);
  EXPECT_EQ(idx.FindOption(idx.FindVariant({"m2", "z"}), idx.FindType("a")), kNoId);
  EXPECT_EQ(idx.model(idx.FindModel("m2")).cold_order.size(), 1u);
}

TEST(SelectionIndexTest, IdsSurviveRebuilds) {
  SelectionIndex first = *SelectionIndex::Create(Base());
  const VariantId x = first.FindVariant({"m1", "x"});
  const VariantId w = first.FindVariant({"m3", "w"});
  const WorkerTypeId b = first.FindType("b");

  SelectionCatalogue next = Base();
  next.apps[0].variants.erase(next.apps[0].variants.begin() + 1);  // drop m1:y
  next.apps[1].variants.push_back(Var("m3", "new", 0.5, {{"a", LinearProfile(1, 1, 1, 1)}}));
  std::swap(next.worker_types[0], next.worker_types[1]);
  SelectionIndex second = *SelectionIndex::Create(next, &first);
  EXPECT_EQ(second.FindVariant({"m1", "x"}), x);
  EXPECT_EQ(second.FindVariant({"m3", "w"}), w);
  EXPECT_EQ(second.FindType("b"), b);
  const VariantId y = first.FindVariant({"m1", "y"});
  EXPECT_EQ(second.FindVariant({"m1", "y"}), kNoId);
  EXPECT_FALSE(second.variant(y).present);
  EXPECT_EQ(second.FindVariant({"m3", "new"}), static_cast<VariantId>(first.variants().size()));

  // Back again: y gets its old id.
  SelectionIndex third = *SelectionIndex::Create(Base(), &second);
  EXPECT_EQ(third.FindVariant({"m1", "y"}), y);
  EXPECT_FALSE(third.variant(second.FindVariant({"m3", "new"})).present);

  // A model that moves to another app gets new ids.
  SelectionCatalogue moved = Base();
  moved.apps[1].variants.push_back(moved.apps[0].variants.back());  // m2:z into app2
  moved.apps[0].variants.pop_back();
  SelectionIndex fourth = *SelectionIndex::Create(moved, &third);
  const VariantId z = fourth.FindVariant({"m2", "z"});
  EXPECT_NE(z, third.FindVariant({"m2", "z"}));
  EXPECT_EQ(fourth.variant(z).app, fourth.FindApp("app2"));
  EXPECT_EQ(fourth.model(fourth.FindModel("m2")).app, fourth.FindApp("app2"));
}

TEST(SelectionIndexTest, RejectsInconsistentCatalogues) {
  SelectionCatalogue c = Base();
  c.worker_types.push_back(c.worker_types[0]);
  EXPECT_FALSE(SelectionIndex::Create(c).ok());

  c = Base();
  c.apps.push_back(c.apps[1]);
  EXPECT_FALSE(SelectionIndex::Create(c).ok());

  c = Base();
  c.apps[1].variants.push_back(Var("m1", "other", 0.5, {}));
  auto model_twice = SelectionIndex::Create(c);
  ASSERT_FALSE(model_twice.ok());
  EXPECT_NE(model_twice.status().message().find("two apps"), std::string::npos);

  c = Base();
  c.apps[0].variants.push_back(c.apps[0].variants[0]);
  EXPECT_FALSE(SelectionIndex::Create(c).ok());

  c = Base();
  c.apps[0].variants[0].accuracy = 1.5;
  EXPECT_FALSE(SelectionIndex::Create(c).ok());
}

}  // namespace
}  // namespace maitre::policy
