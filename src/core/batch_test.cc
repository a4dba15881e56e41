#include "core/batch.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre {
namespace {

using ::testing::HasSubstr;

Tensor Rows(std::string name, std::vector<float> values, std::vector<int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return t;
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.As<float>(), t.As<float>() + t.NumElements());
}

TEST(BatchTest, ConcatJoinsRowsInRequestOrder) {
  std::vector<Tensor> a = {Rows("x", {1, 2}, {1, 2}), Rows("y", {9}, {1, 1})};
  std::vector<Tensor> b = {Rows("x", {3, 4, 5, 6}, {2, 2}), Rows("y", {8, 7}, {2, 1})};
  absl::StatusOr<std::vector<Tensor>> joined = ConcatRows({&a, &b});
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->size(), 2u);
  EXPECT_EQ((*joined)[0].name, "x");
  EXPECT_EQ((*joined)[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values((*joined)[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ((*joined)[1].shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(Values((*joined)[1]), (std::vector<float>{9, 8, 7}));
}

TEST(BatchTest, ConcatTilesOneRequest) {
  std::vector<Tensor> row = {Rows("x", {1, 2}, {1, 2})};
  absl::StatusOr<std::vector<Tensor>> tiled = ConcatRows({&row, &row, &row});
  ASSERT_TRUE(tiled.ok());
  EXPECT_EQ((*tiled)[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values((*tiled)[0]), (std::vector<float>{1, 2, 1, 2, 1, 2}));
}

TEST(BatchTest, TileRowsRepeatsOneRequest) {
  std::vector<Tensor> row = {Rows("x", {1, 2}, {1, 2})};
  absl::StatusOr<std::vector<Tensor>> tiled = TileRows(row, 3);
  ASSERT_TRUE(tiled.ok()) << tiled.status();
  EXPECT_EQ((*tiled)[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values((*tiled)[0]), (std::vector<float>{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(TileRows(row, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchTest, ConcatRefusesMismatches) {
  std::vector<Tensor> base = {Rows("x", {1, 2}, {1, 2})};
  std::vector<Tensor> other_name = {Rows("z", {1, 2}, {1, 2})};
  std::vector<Tensor> other_dims = {Rows("x", {1, 2}, {1, 1, 2})};
  std::vector<Tensor> other_width = {Rows("x", {1, 2, 3}, {1, 3})};
  std::vector<Tensor> other_type = {Rows("x", {1, 2}, {1, 2})};
  other_type[0].dtype = DataType::kInt32;
  std::vector<Tensor> two = {Rows("x", {1, 2}, {1, 2}), Rows("y", {1}, {1, 1})};
  std::vector<Tensor> short_data = {Rows("x", {1}, {1, 2})};
  std::vector<Tensor> scalar = {Rows("x", {1}, {})};
  for (const std::vector<Tensor>* bad :
       {&other_name, &other_dims, &other_width, &other_type, &two, &short_data}) {
    absl::Status s = ConcatRows({&base, bad}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("request 1")) << s;
  }
  EXPECT_THAT(ConcatRows({&scalar}).status().message(), HasSubstr("no batch dimension"));
  EXPECT_FALSE(ConcatRows({}).ok());
  EXPECT_FALSE(ConcatRows({nullptr}).ok());
}

TEST(BatchTest, SplitIsTheInverseOfConcat) {
  std::vector<Tensor> out = {Rows("logits", {1, 2, 3, 4, 5, 6}, {3, 2}),
                             Rows("score", {7, 8, 9}, {3})};
  absl::StatusOr<std::vector<std::vector<Tensor>>> parts = SplitRows(out, {1, 0, 2});
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0][0].name, "logits");
  EXPECT_EQ((*parts)[0][0].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Values((*parts)[0][0]), (std::vector<float>{1, 2}));
  EXPECT_EQ((*parts)[1][0].shape, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE((*parts)[1][0].data.empty());
  EXPECT_EQ(Values((*parts)[2][0]), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_EQ(Values((*parts)[2][1]), (std::vector<float>{8, 9}));

  std::vector<const std::vector<Tensor>*> again;
  for (const auto& p : *parts) again.push_back(&p);
  absl::StatusOr<std::vector<Tensor>> rejoined = ConcatRows(again);
  ASSERT_TRUE(rejoined.ok());
  EXPECT_EQ((*rejoined)[0].data, out[0].data);
  EXPECT_EQ((*rejoined)[1].data, out[1].data);
}

TEST(BatchTest, SplitRefusesWrongRowCounts) {
  std::vector<Tensor> out = {Rows("logits", {1, 2, 3, 4}, {2, 2})};
  EXPECT_THAT(SplitRows(out, {1, 2}).status().message(), HasSubstr("batch has 3 rows"));
  EXPECT_FALSE(SplitRows(out, {3, -1}).ok());
  std::vector<Tensor> scalar = {Rows("s", {1}, {})};
  EXPECT_FALSE(SplitRows(scalar, {1}).ok());
}

}  // namespace
}  // namespace maitre
