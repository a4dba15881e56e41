#include "controller/pipelines/stage_rows.h"

#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

// A query of `rows` rows through two stages one after the other, each
// 100 µs queued and 200 µs computing, answered `total_us` after receipt.
PipelineAnswer Chain(int64_t rows, int64_t total_us) {
  PipelineAnswer answer;
  answer.response.timings.batch_size = rows;
  answer.response.timings.total_us = total_us;
  answer.stages.push_back({"fast", "m1", "torch", "w1", rows, 0, 0, 100, 200});
  answer.stages.push_back({"slow", "m2", "torch", "w1", rows / 2, 0, 0, 100, 200});
  return answer;
}

TEST(StageRowsTest, CountsRowsByStage) {
  StageRows rows;
  rows.Record(Chain(4, 1000));
  rows.Record(Chain(4, 1000));
  const StageRows::Counts counts = rows.Get();
  EXPECT_EQ(counts.rows, 8);
  EXPECT_EQ(counts.stages.at("fast"), 8);
  EXPECT_EQ(counts.stages.at("slow"), 4);
}

// The serving path per stage is the query's time outside its stages'
// queue and compute, over the stages it ran: (1,000 − 600) / 2 = 200 µs.
// It is shown only once enough queries were answered, as the median of
// the latest, so a few slow ones do not move it.
TEST(StageRowsTest, TheStageOverheadIsTheMedianOfTheLatestQueries) {
  StageRows rows;
  for (size_t i = 0; i + 1 < StageRows::kOverheadMinQueries; ++i) rows.Record(Chain(2, 1000));
  EXPECT_FALSE(rows.Get().stage_overhead_ms.has_value());
  rows.Record(Chain(2, 50000));  // one slow answer
  StageRows::Counts counts = rows.Get();
  ASSERT_TRUE(counts.stage_overhead_ms.has_value());
  EXPECT_DOUBLE_EQ(*counts.stage_overhead_ms, 0.2);
  EXPECT_EQ(counts.overhead_queries, static_cast<int64_t>(StageRows::kOverheadMinQueries));
  // A window's worth of slower answers replaces the earlier ones.
  for (size_t i = 0; i < StageRows::kOverheadWindow; ++i) rows.Record(Chain(2, 2600));
  counts = rows.Get();
  EXPECT_DOUBLE_EQ(*counts.stage_overhead_ms, 1.0);
  EXPECT_EQ(counts.overhead_queries, static_cast<int64_t>(StageRows::kOverheadWindow));
}

}  // namespace
}  // namespace maitre::controller
