#include "worker/instance.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "worker/testing/fake_executor.h"

namespace maitre::worker {
namespace {

using testing::FakeExecutor;

Tensor Row(float value, int rows = 1) {
  Tensor t{"x", DataType::kFp32, {rows, 2}, std::string(rows * 2 * sizeof(float), '\0')};
  for (int i = 0; i < rows * 2; ++i) t.MutableAs<float>()[i] = value;
  return t;
}

// Collects one query's answer.
struct Answer {
  absl::Notification done;
  InferResult result;
  InferCallback Callback() {
    return [this](InferResult r) {
      result = std::move(r);
      done.Notify();
    };
  }
};

struct Fixture {
  ManualClock clock{0};
  FakeExecutor* executor = nullptr;
  std::unique_ptr<Instance> instance;

  explicit Fixture(size_t max_queue = 100, Nanos max_queue_delay = 0) {
    auto fake = std::make_unique<FakeExecutor>();
    executor = fake.get();
    Instance::Options options;
    options.key = {"m", "v"};
    options.replicas.push_back(std::move(fake));
    options.policy =
        *policy::CreateBatchingPolicy({"timeout", 8, max_queue_delay}, Profile());
    options.clock = &clock;
    options.max_queue = max_queue;
    instance = *Instance::Create(std::move(options));
  }

  void Submit(Answer& answer, float value, Nanos deadline, int rows = 1) {
    InferTask task;
    task.inputs.push_back(Row(value, rows));
    task.rows = rows;
    task.deadline = deadline;
    task.done = answer.Callback();
    instance->Submit(std::move(task));
  }
};

TEST(InstanceTest, ServesAQuery) {
  Fixture f;
  Answer a;
  f.Submit(a, 1.5f, kSecond);
  a.done.WaitForNotification();
  ASSERT_TRUE(a.result.status.ok()) << a.result.status;
  ASSERT_EQ(a.result.outputs.size(), 1u);
  EXPECT_FLOAT_EQ(a.result.outputs[0].As<float>()[0], 3.0f);
  EXPECT_EQ(a.result.batch_rows, 1);
}

TEST(InstanceTest, ExpiredQueryIsAnsweredWhileTheExecutorIsBusy) {
  Fixture f;
  f.executor->Close();
  Answer running, waiting;
  f.Submit(running, 1, kSecond);
  f.executor->AwaitRunning(1);
  f.Submit(waiting, 2, 10 * kMillisecond);
  f.clock.Advance(11 * kMillisecond);
  // Answered by the reaper although the only replica is still busy.
  waiting.done.WaitForNotification();
  EXPECT_EQ(waiting.result.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(running.done.HasBeenNotified());
  f.executor->Open();
  running.done.WaitForNotification();
  EXPECT_TRUE(running.result.status.ok());
  InstanceReport report = f.instance->TakeReport();
  EXPECT_EQ(report.interval.dropped, 1);
  EXPECT_EQ(report.interval.served, 1);
  EXPECT_EQ(report.interval.arrivals, 2);
}

TEST(InstanceTest, QueriesWaitingBehindABusyExecutorRunAsOneBatch) {
  Fixture f;
  f.executor->Close();
  Answer first, a, b, c;
  f.Submit(first, 1, kSecond);
  f.executor->AwaitRunning(1);
  f.Submit(a, 1, kSecond);
  f.Submit(b, 2, kSecond, /*rows=*/2);
  f.Submit(c, 3, kSecond);
  f.executor->Open();
  for (Answer* x : {&first, &a, &b, &c}) x->done.WaitForNotification();
  EXPECT_EQ(f.executor->batches(), (std::vector<int64_t>{1, 4}));
  ASSERT_TRUE(b.result.status.ok());
  EXPECT_EQ(b.result.outputs[0].shape, (std::vector<int64_t>{2, 1}));
  EXPECT_FLOAT_EQ(b.result.outputs[0].As<float>()[1], 4.0f);
  EXPECT_FLOAT_EQ(c.result.outputs[0].As<float>()[0], 6.0f);
  EXPECT_EQ(c.result.batch_rows, 4);
  // Rates count rows, the profiles' unit: the two-row query counts twice.
  InstanceReport report = f.instance->TakeReport();
  EXPECT_EQ(report.interval.arrivals, 5);
  EXPECT_EQ(report.interval.served, 5);
}

// A new batch limit (a later load's) applies to what is already queued.
TEST(InstanceTest, ANewBatchLimitAppliesToTheQueriesWaiting) {
  Fixture f;
  f.executor->Close();
  Answer first, a, b, c, d;
  f.Submit(first, 1, kSecond);
  f.executor->AwaitRunning(1);
  for (Answer* x : {&a, &b, &c, &d}) f.Submit(*x, 1, kSecond);
  f.instance->SetBatching(2, *policy::CreateBatchingPolicy({"timeout", 2, 0}, Profile()));
  EXPECT_EQ(f.instance->max_batch(), 2);
  f.executor->Open();
  for (Answer* x : {&first, &a, &b, &c, &d}) x->done.WaitForNotification();
  EXPECT_EQ(f.executor->batches(), (std::vector<int64_t>{1, 2, 2}));
  // The report says the new cap: the controller estimates the queue's drain
  // by it (docs/policies.md, "Variant selection").
  EXPECT_EQ(f.instance->TakeReport().max_batch, 2);
}

TEST(InstanceTest, RefusesWhenFullOrAlreadyLate) {
  Fixture f(/*max_queue=*/1);
  f.executor->Close();
  Answer running, queued, refused, late;
  f.Submit(running, 1, kSecond);
  f.executor->AwaitRunning(1);
  f.Submit(queued, 1, kSecond);
  f.Submit(refused, 1, kSecond);
  refused.done.WaitForNotification();
  EXPECT_EQ(refused.result.status.code(), absl::StatusCode::kResourceExhausted);
  f.Submit(late, 1, /*deadline=*/0);
  late.done.WaitForNotification();
  EXPECT_EQ(late.result.status.code(), absl::StatusCode::kDeadlineExceeded);
  f.executor->Open();
  queued.done.WaitForNotification();
  EXPECT_TRUE(queued.result.status.ok());
}

TEST(InstanceTest, StopAnswersEverythingQueued) {
  Fixture f;
  f.executor->Close();
  Answer running, queued;
  f.Submit(running, 1, kSecond);
  f.executor->AwaitRunning(1);
  f.Submit(queued, 1, kSecond);
  std::thread stopper([&] { f.instance->Stop(); });
  queued.done.WaitForNotification();
  EXPECT_EQ(queued.result.status.code(), absl::StatusCode::kNotFound);
  f.executor->Open();
  stopper.join();
  EXPECT_TRUE(running.result.status.ok());
  Answer after;
  f.Submit(after, 1, kSecond);
  after.done.WaitForNotification();
  EXPECT_EQ(after.result.status.code(), absl::StatusCode::kNotFound);
}

// Unloading drains (InstanceManager::Unload): what the instance holds is
// run, not handed back, and new queries are refused as for a variant the
// worker does not hold.
TEST(InstanceTest, DrainRunsWhatIsQueuedAtOnceAndRefusesNewQueries) {
  // The policy would hold these a second for company; the clock stands still.
  Fixture f(100, kSecond);
  f.executor->Close();
  Answer a, b, c;
  f.Submit(a, 1, 10 * kSecond);
  f.Submit(b, 2, 10 * kSecond);
  f.Submit(c, 3, 10 * kSecond);
  EXPECT_FALSE(a.done.HasBeenNotified());
  absl::Notification drained;
  std::thread drainer([&] {
    f.instance->Drain(f.clock.Now() + 10 * kSecond);
    drained.Notify();
  });
  f.executor->AwaitRunning(1);  // all three at once, without waiting
  EXPECT_FALSE(drained.HasBeenNotified());  // not while its batch runs
  Answer refused;
  f.Submit(refused, 4, 10 * kSecond);
  refused.done.WaitForNotification();
  EXPECT_EQ(refused.result.status.code(), absl::StatusCode::kNotFound);
  f.executor->Open();
  drainer.join();
  for (Answer* x : {&a, &b, &c}) {
    x->done.WaitForNotification();
    EXPECT_TRUE(x->result.status.ok()) << x->result.status;
    EXPECT_EQ(x->result.batch_rows, 3);
  }
  f.instance->Stop();
}

TEST(InstanceTest, DrainReturnsAtItsDeadline) {
  Fixture f;
  f.executor->Close();
  Answer running;
  f.Submit(running, 1, 100 * kSecond);
  f.executor->AwaitRunning(1);
  absl::Notification drained;
  const Nanos deadline = f.clock.Now() + kSecond;
  std::thread drainer([&] {
    f.instance->Drain(deadline);
    drained.Notify();
  });
  f.clock.Advance(kSecond);
  drained.WaitForNotification();
  drainer.join();
  f.executor->Open();
  f.instance->Stop();
  EXPECT_TRUE(running.result.status.ok());
}

}  // namespace
}  // namespace maitre::worker

namespace maitre::worker {
namespace {

TEST(InstanceTest, ReplicasCanBeAddedAndRetired) {
  Fixture f;
  f.instance->AddReplica(std::make_unique<FakeExecutor>());
  f.instance->AddReplica(std::make_unique<FakeExecutor>());
  EXPECT_EQ(f.instance->replicas(), 3);
  f.instance->RemoveReplicas(5);  // never the last one
  for (int i = 0; i < 1000 && f.instance->replicas() > 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(f.instance->replicas(), 1);
  Answer a;
  f.Submit(a, 1, kSecond);
  a.done.WaitForNotification();
  EXPECT_TRUE(a.result.status.ok());
  EXPECT_EQ(f.instance->TakeReport().replicas, 1);
}

}  // namespace
}  // namespace maitre::worker

namespace maitre::worker {
namespace {

TEST(InstanceTest, AQueryPastItsObjectiveIsStillServedBeforeItsDeadline) {
  ManualClock clock(0);
  auto fake = std::make_unique<FakeExecutor>();
  FakeExecutor* executor = fake.get();
  Instance::Options options;
  options.key = {"m", "v"};
  options.replicas.push_back(std::move(fake));
  // With a profile, the timeout policy drops a head whose deadline passed.
  options.policy = *policy::CreateBatchingPolicy(
      {"timeout", 8, 0}, *Profile::Create({{1, 0.5, 0.6}, {8, 1, 1.2}}, 1, 1));
  options.clock = &clock;
  auto instance = *Instance::Create(std::move(options));

  executor->Close();
  Answer first, late;
  InferTask busy;
  busy.inputs.push_back(Row(1));
  busy.deadline = kSecond;
  busy.done = first.Callback();
  instance->Submit(std::move(busy));
  executor->AwaitRunning(1);
  InferTask task;
  task.inputs.push_back(Row(2));
  task.objective = 5 * kMillisecond;
  task.deadline = kSecond;
  task.done = late.Callback();
  instance->Submit(std::move(task));
  clock.Advance(10 * kMillisecond);  // the objective passes while the replica is busy
  executor->Open();
  late.done.WaitForNotification();
  EXPECT_TRUE(late.result.status.ok()) << late.result.status;
  first.done.WaitForNotification();
}

}  // namespace
}  // namespace maitre::worker
