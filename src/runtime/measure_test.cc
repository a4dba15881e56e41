#include "runtime/measure.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/testing/fake_executor.h"
#include "runtime/testing/zoo.h"

namespace maitre::runtime {
namespace {

using ::testing::HasSubstr;

std::vector<Tensor> OneRow() {
  Tensor t{"input", DataType::kFp32, {1, 2}, std::string(8, '\0')};
  return {t};
}

TEST(QuantileTest, InterpolatesLikeNumpy) {
  EXPECT_DOUBLE_EQ(Quantile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(Quantile({3}, 0.99), 3);
  EXPECT_DOUBLE_EQ(Quantile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.99), 9.91);
  EXPECT_DOUBLE_EQ(Quantile({1, 2}, 1.5), 2);
}

// With a manual clock the fake's latency is exact, so the points are too.
TEST(MeasureTest, MeasuresEachBatchAndStopsPastTheCeiling) {
  ManualClock clock;
  testing::FakeExecutor executor({testing::EchoClassifier(10), &clock,
                                  [](int64_t batch) { return batch * 10 * kMillisecond; }});
  MeasureOptions options;
  options.batch_sizes = {1, 2, 4, 8, 16};
  options.latency_ceiling_ms = 35;
  options.warmup = 2;
  options.min_repetitions = 5;
  options.min_time_per_batch = 100 * kMillisecond;
  options.clock = &clock;
  absl::StatusOr<std::vector<LatencyPoint>> points =
      MeasureLatencies(executor, OneRow(), options);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 3u);  // 40 ms at batch 4 crosses 35 ms
  EXPECT_EQ((*points)[0].batch, 1);
  EXPECT_DOUBLE_EQ((*points)[0].p50_ms, 10);
  EXPECT_DOUBLE_EQ((*points)[0].p99_ms, 10);
  EXPECT_EQ((*points)[2].batch, 4);
  EXPECT_DOUBLE_EQ((*points)[2].p50_ms, 40);
  // Batch 1: 2 warm-up runs, then 10 timed runs to spend 100 ms; batch 2: 2
  // + 5 (the minimum already spends 100 ms); batch 4: 2 + 5.
  std::vector<int64_t> want;
  for (int i = 0; i < 12; ++i) want.push_back(1);
  for (int i = 0; i < 7; ++i) want.push_back(2);
  for (int i = 0; i < 7; ++i) want.push_back(4);
  EXPECT_EQ(executor.batches(), want);
}

// Interference only adds time: each point keeps its least disturbed round,
// and the rounds interleave the batch sizes so that one burst of
// interference hits only one round of each.
TEST(MeasureTest, RoundsKeepEachBatchsLeastDisturbedRound) {
  ManualClock clock;
  int calls = 0;
  // Calls 1-5 are round 1 at batch 1 and 26-30 round 3 at batch 2: slowed 3x.
  testing::FakeExecutor executor({testing::EchoClassifier(10), &clock, [&calls](int64_t batch) {
                                    ++calls;
                                    bool disturbed = calls <= 5 || calls > 25;
                                    return batch * 10 * kMillisecond * (disturbed ? 3 : 1);
                                  }});
  MeasureOptions options;
  options.batch_sizes = {1, 2};
  options.warmup = 0;
  options.min_repetitions = 5;
  options.min_time_per_batch = 0;
  options.rounds = 3;
  options.clock = &clock;
  auto points = MeasureLatencies(executor, OneRow(), options);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 2u);
  EXPECT_DOUBLE_EQ((*points)[0].p50_ms, 10);
  EXPECT_DOUBLE_EQ((*points)[0].p99_ms, 10);
  EXPECT_DOUBLE_EQ((*points)[1].p50_ms, 20);
  std::vector<int64_t> want;
  for (int round = 0; round < 3; ++round) {
    for (int64_t batch : {1, 2}) want.insert(want.end(), 5, batch);
  }
  EXPECT_EQ(executor.batches(), want);

  // With one round the disturbed timing would have been kept.
  calls = 0;
  options.rounds = 1;
  points = MeasureLatencies(executor, OneRow(), options);
  ASSERT_TRUE(points.ok());
  EXPECT_DOUBLE_EQ((*points)[0].p50_ms, 30);
}

// Each round after the first starts at least round_pause after the one
// before it, so that the rounds are not all inside one slow stretch.
TEST(MeasureTest, RoundsArePausedApart) {
  ManualClock clock;
  std::vector<Nanos> run_at;
  testing::FakeExecutor executor({testing::EchoClassifier(10), &clock, [&](int64_t) {
                                    run_at.push_back(clock.Now());
                                    return 10 * kMillisecond;
                                  }});
  MeasureOptions options;
  options.batch_sizes = {1};
  options.warmup = 0;
  options.min_repetitions = 1;
  options.min_time_per_batch = 0;
  options.rounds = 3;
  options.round_pause = 5 * kSecond;
  options.clock = &clock;
  // The manual clock moves only when told to: move it while the rounds wait.
  std::atomic<bool> done{false};
  std::thread mover([&] {
    while (!done.load()) {
      clock.Advance(100 * kMillisecond);
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  auto points = MeasureLatencies(executor, OneRow(), options);
  done = true;
  mover.join();
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(run_at.size(), 3u);
  EXPECT_GE(run_at[1] - run_at[0], 5 * kSecond);
  EXPECT_GE(run_at[2] - run_at[1], 5 * kSecond);

  options.round_pause = -1;
  EXPECT_EQ(MeasureLatencies(executor, OneRow(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MeasureTest, MeasuresAgainWhileTheHostRanSlow) {
  ManualClock clock;
  int calls = 0;
  // The first attempt (calls 1-2) runs 3x slow, as the host does meanwhile.
  testing::FakeExecutor executor({testing::EchoClassifier(10), &clock, [&calls](int64_t batch) {
                                    ++calls;
                                    return batch * 10 * kMillisecond * (calls <= 2 ? 3 : 1);
                                  }});
  std::vector<double> host = {1.0, 1.5, 1.0, 1.0};  // before and after each attempt
  size_t asked = 0;
  MeasureOptions options;
  options.batch_sizes = {1, 2};
  options.warmup = 0;
  options.min_repetitions = 1;
  options.min_time_per_batch = 0;
  options.host_slowdown = [&] { return host[std::min(asked++, host.size() - 1)]; };
  options.attempts = 3;
  options.disturbed_pause = 0;
  options.clock = &clock;
  auto points = MeasureLatencies(executor, OneRow(), options);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_EQ(asked, 4u) << "a quiet second attempt ends it";
  EXPECT_DOUBLE_EQ((*points)[0].p50_ms, 10);
  EXPECT_DOUBLE_EQ((*points)[1].p50_ms, 20);
  EXPECT_EQ(executor.batches(), (std::vector<int64_t>{1, 2, 1, 2}));

  // A host slow throughout: `attempts` in all, then what was best.
  host = {2.0};
  asked = 0;
  calls = 0;
  points = MeasureLatencies(executor, OneRow(), options);
  ASSERT_TRUE(points.ok());
  EXPECT_EQ(asked, 6u);
  EXPECT_DOUBLE_EQ((*points)[0].p50_ms, 10);
}

TEST(MeasureTest, LaterRoundsTimeOnlyTheBatchesTheFirstReached) {
  ManualClock clock;
  testing::FakeExecutor executor({testing::EchoClassifier(10), &clock,
                                  [](int64_t batch) { return batch * 10 * kMillisecond; }});
  MeasureOptions options;
  options.batch_sizes = {1, 2, 4, 8};
  options.latency_ceiling_ms = 15;  // batch 2 (20 ms) crosses it
  options.warmup = 0;
  options.min_repetitions = 1;
  options.min_time_per_batch = 0;
  options.rounds = 2;
  options.clock = &clock;
  auto points = MeasureLatencies(executor, OneRow(), options);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_EQ(points->size(), 2u);
  EXPECT_EQ(executor.batches(), (std::vector<int64_t>{1, 2, 1, 2}));
}

TEST(MeasureTest, CapsRepetitions) {
  ManualClock clock;
  testing::FakeExecutor executor({testing::EchoClassifier(10), &clock,
                                  [](int64_t) { return kMicrosecond; }});
  MeasureOptions options;
  options.batch_sizes = {1};
  options.warmup = 0;
  options.max_repetitions = 50;
  options.clock = &clock;
  ASSERT_TRUE(MeasureLatencies(executor, OneRow(), options).ok());
  EXPECT_EQ(executor.calls(), 50);
}

TEST(MeasureTest, RefusesBadOptionsAndRows) {
  ManualClock clock;
  testing::FakeExecutor executor({testing::EchoClassifier(10)});
  MeasureOptions options;
  EXPECT_THAT(MeasureLatencies(executor, OneRow(), options).status().message(),
              HasSubstr("clock"));
  options.clock = &clock;
  options.batch_sizes = {1, 4, 2};
  EXPECT_THAT(MeasureLatencies(executor, OneRow(), options).status().message(),
              HasSubstr("increasing"));
  options.batch_sizes = {1, 2};
  options.rounds = 0;
  EXPECT_THAT(MeasureLatencies(executor, OneRow(), options).status().message(),
              HasSubstr("round"));
  options.rounds = 1;
  std::vector<Tensor> two_rows = OneRow();
  two_rows[0].shape = {2, 1};
  EXPECT_THAT(MeasureLatencies(executor, two_rows, options).status().message(),
              HasSubstr("batch 1"));
  testing::FakeExecutor failing({[](const std::vector<Tensor>&)
                                     -> absl::StatusOr<std::vector<Tensor>> {
    return absl::InternalError("broken");
  }});
  EXPECT_THAT(MeasureLatencies(failing, OneRow(), options).status().message(),
              HasSubstr("at batch 1: broken"));
}

// A real model on the real clock: assert the structure, never the times.
TEST(MeasureTest, ProfilesARealModel) {
  ConfigureProcessThreads(1);
  absl::StatusOr<std::vector<testing::ZooModel>> zoo = testing::LoadZoo();
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  absl::StatusOr<const Valset*> valset = testing::ZooValset();
  ASSERT_TRUE(valset.ok()) << valset.status();
  ExecutorOptions eo;
  eo.model_path = zoo->front().torchscript;
  for (const testing::ZooModel& m : *zoo) {
    if (m.name.find("mlp") != std::string::npos) eo.model_path = m.torchscript;
  }
  eo.spec = testing::FmnistSpec();
  absl::StatusOr<std::unique_ptr<Executor>> executor = CreateExecutor(eo);
  ASSERT_TRUE(executor.ok()) << executor.status();
  absl::StatusOr<Tensor> row = SliceRows((*valset)->inputs, 0, 1);
  ASSERT_TRUE(row.ok());

  MeasureOptions options;
  options.batch_sizes = {1, 2, 4, 8};
  options.min_time_per_batch = 20 * kMillisecond;
  options.clock = SteadyClock::Get();
  absl::StatusOr<std::vector<LatencyPoint>> points =
      MeasureLatencies(**executor, {*row}, options);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 4u);
  for (size_t i = 0; i < points->size(); ++i) {
    EXPECT_EQ((*points)[i].batch, options.batch_sizes[i]);
    EXPECT_GT((*points)[i].p50_ms, 0);
    EXPECT_LE((*points)[i].p50_ms, (*points)[i].p99_ms);
  }
  EXPECT_TRUE(Profile::Create(*points, 1, 1).ok());

  options.latency_ceiling_ms = 1e-6;  // every batch crosses it
  points = MeasureLatencies(**executor, {*row}, options);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_EQ(points->size(), 1u);
}

}  // namespace
}  // namespace maitre::runtime
