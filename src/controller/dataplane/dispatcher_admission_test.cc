// The dispatcher under a flood (docs/architecture.md, "Admission and
// overload"): once the queries already sent to the only instance would keep
// a new one past its deadline, the new one is refused RESOURCE_EXHAUSTED
// before Infer returns, without reaching the worker, and counted as refused
// demand; the queries already admitted are still answered. With a burst
// pool (docs/architecture.md, "The burst pool"), the Bouncer sends those
// queries to the pool instead: the pool loads the variant on its worker
// first (its cold start), charges each query it takes, and beyond its
// concurrency the query is refused as it would have been without a pool.
// The workers are in-process stand-ins that hold every query until the
// test lets them answer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "controller/dataplane/dispatcher.h"
#include "controller/dataplane/dispatcher_testing.h"
#include "controller/serving_metrics.h"
#include "metrics/metric_set.h"
#include "core/work_queue.h"

namespace maitre::controller {
namespace {

using ::testing::HasSubstr;

const VariantKey kKey{"m", "v"};

// Holds each query's callback until Answer().
class HoldingApi final : public testing::ServingOnlyApi {
 public:
  void Infer(const VariantKey&, std::shared_ptr<const std::vector<Tensor>>,
             const InferOptions& options, WorkerReplyCallback done) override {
    absl::MutexLock lock(&mu_);
    held_.push_back(std::move(done));
    timeouts_.push_back(options.timeout);
  }

  absl::StatusOr<LoadResult> Load(const VariantSpec& spec, int replicas,
                                  const std::vector<LatencyPoint>& profile,
                                  int32_t max_batch) override {
    absl::MutexLock lock(&mu_);
    ++loads_;
    return testing::ServingOnlyApi::Load(spec, replicas, profile, max_batch);
  }

  size_t held() {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }
  int loads() {
    absl::MutexLock lock(&mu_);
    return loads_;
  }
  // The time to its deadline each query was sent with, in order.
  std::vector<Nanos> timeouts() {
    absl::MutexLock lock(&mu_);
    return timeouts_;
  }
  // Waits until `n` queries are held (progress, not a time budget).
  void AwaitHeld(size_t n) {
    while (held() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Answers every query held so far, each as one of a batch of
  // `batch_size` computed for `compute_us`.
  void Answer(int64_t compute_us = 0, int batch_size = 0) {
    std::vector<WorkerReplyCallback> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_);
    }
    for (WorkerReplyCallback& done : held) {
      WorkerReply reply;
      reply.compute_us = compute_us;
      reply.batch_size = batch_size;
      reply.outputs.push_back({"logits", DataType::kFp32, {1, 10}, std::string(40, '\0')});
      std::move(done)(std::move(reply));
    }
  }

 private:
  absl::Mutex mu_;
  std::vector<WorkerReplyCallback> held_ ABSL_GUARDED_BY(mu_);
  int loads_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Nanos> timeouts_ ABSL_GUARDED_BY(mu_);
};

// What came back for one query, and whether it came before Infer returned.
struct Outcome {
  absl::Mutex mu;
  bool answered = false;
  absl::Status status;
  std::string worker;  // who answered
};

class DispatcherAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 5 s per query and no batching: a query admitted behind n others is
    // estimated to answer in (n + 1) · 5 s.
    ASSERT_TRUE(testing::SetUpOneVariant(
                    dir_.File("registry.db"), kKey,
                    registry::test_util::MakeProfile(kKey.model, kKey.variant, "small",
                                                     /*base_ms=*/5000, /*max_batch=*/1)
                        .profile,
                    [this](const std::string&, const std::string&) {
                      return std::make_unique<Forward>(worker_);
                    },
                    world_)
                    .ok());
    placer_ = std::make_unique<Placer>(Placer::Options{world_.cluster.get(), &control_});
    auto id = world_.cluster->AddWorker("small", "w", 0, "");
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_TRUE(world_.cluster->BeginLoad(*id, kKey, nullptr).ok());
    world_.cluster->FinishLoad(*id, kKey, absl::OkStatus());
    auto metrics = ServingMetrics::Create(&metric_set_, world_.cluster.get());
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = *std::move(metrics);
    MakeDispatcher(nullptr);
  }

  void MakeDispatcher(BurstPool* pool) {
    Dispatcher::Options options;
    options.catalog = &world_.catalog;
    options.cluster = world_.cluster.get();
    options.placer = placer_.get();
    options.refused = &refused_;
    options.burst_pool = pool;
    options.app_usage = &usage_;
    options.metrics = metrics_.get();
    dispatcher_ = std::make_unique<Dispatcher>(options);
  }

  // The cluster owns its WorkerApi; this one passes queries and loads to
  // the test's.
  class Forward final : public testing::ServingOnlyApi {
   public:
    explicit Forward(std::shared_ptr<HoldingApi> to) : to_(std::move(to)) {}
    void Infer(const VariantKey& k, std::shared_ptr<const std::vector<Tensor>> in,
               const InferOptions& o, WorkerReplyCallback done) override {
      to_->Infer(k, std::move(in), o, std::move(done));
    }
    absl::StatusOr<LoadResult> Load(const VariantSpec& spec, int replicas,
                                    const std::vector<LatencyPoint>& profile,
                                    int32_t max_batch) override {
      return to_->Load(spec, replicas, profile, max_batch);
    }

   private:
    std::shared_ptr<HoldingApi> to_;
  };

  // Sends one query for model m with a latency objective of a minute (and
  // the client's own deadline, if given); `answered_inline` says whether it
  // was answered before Infer returned.
  std::shared_ptr<Outcome> Send(bool* answered_inline,
                                std::optional<Nanos> client_deadline = std::nullopt) {
    auto outcome = std::make_shared<Outcome>();
    InferRequest request;
    request.requirements.latency_ms = 60'000;
    request.client_deadline = client_deadline;
    request.inputs.push_back(
        {"input", DataType::kFp32, {1, 1, 28, 28}, std::string(784 * 4, '\0')});
    dispatcher_->Infer({"", kKey.model, ""}, std::move(request), SteadyClock::Get()->Now(),
                       [outcome](absl::StatusOr<InferResponse> r) {
                         absl::MutexLock lock(&outcome->mu);
                         outcome->answered = true;
                         outcome->status = r.status();
                         if (r.ok()) outcome->worker = r->timings.worker;
                       });
    absl::MutexLock lock(&outcome->mu);
    *answered_inline = outcome->answered;
    return outcome;
  }

  registry::test_util::TempDir dir_;
  std::shared_ptr<HoldingApi> worker_ = std::make_shared<HoldingApi>();
  testing::OneVariant world_;
  WorkQueue control_{1};
  std::unique_ptr<Placer> placer_;
  RefusedDemand refused_;
  AppUsage usage_;
  metrics::MetricSet metric_set_;
  std::unique_ptr<ServingMetrics> metrics_;
  std::unique_ptr<Dispatcher> dispatcher_;
};

TEST_F(DispatcherAdmissionTest, AFloodIsRefusedAtOnceWhileAdmittedQueriesAreAnswered) {
  // Admit until the first refusal: with 60 s to answer and 5 s a query,
  // about a dozen fit in the queue.
  std::vector<std::shared_ptr<Outcome>> admitted;
  std::shared_ptr<Outcome> refused;
  for (int i = 0; i < 100 && refused == nullptr; ++i) {
    bool inline_answer = false;
    std::shared_ptr<Outcome> outcome = Send(&inline_answer);
    if (inline_answer) {
      refused = outcome;
    } else {
      admitted.push_back(outcome);
    }
  }
  ASSERT_NE(refused, nullptr) << "no query was refused";
  EXPECT_GE(admitted.size(), 10u);
  EXPECT_LE(admitted.size(), 13u);
  EXPECT_EQ(worker_->held(), admitted.size());
  {
    absl::MutexLock lock(&refused->mu);
    EXPECT_EQ(refused->status.code(), absl::StatusCode::kResourceExhausted) << refused->status;
    EXPECT_THAT(refused->status.message(), HasSubstr("model 'm'"));
  }
  // The rest of the flood is refused before Infer returns, and none of it
  // reaches the worker.
  for (int i = 0; i < 200; ++i) {
    bool inline_answer = false;
    std::shared_ptr<Outcome> outcome = Send(&inline_answer);
    ASSERT_TRUE(inline_answer);
    absl::MutexLock lock(&outcome->mu);
    ASSERT_EQ(outcome->status.code(), absl::StatusCode::kResourceExhausted);
  }
  EXPECT_EQ(worker_->held(), admitted.size());
  EXPECT_EQ(refused_.Take()["a"], 201);  // the autoscalers see the demand

  // The admitted queries are answered, and the instance takes queries again.
  worker_->Answer();
  for (const std::shared_ptr<Outcome>& outcome : admitted) {
    absl::MutexLock lock(&outcome->mu);
    ASSERT_TRUE(outcome->answered);
    EXPECT_TRUE(outcome->status.ok()) << outcome->status;
  }
  bool inline_answer = true;
  std::shared_ptr<Outcome> after = Send(&inline_answer);
  EXPECT_FALSE(inline_answer);
  EXPECT_EQ(worker_->held(), 1u);
  worker_->Answer();
  absl::MutexLock lock(&after->mu);
  EXPECT_TRUE(after->status.ok()) << after->status;
}

// A client that stops waiting before the objective's deadline (gRPC's own
// deadline) bounds the query: admission judges by the time the client has
// left, and the worker is sent that deadline, not the objective's.
TEST_F(DispatcherAdmissionTest, TheClientsEarlierDeadlineBoundsAdmissionAndTheWorkersDeadline) {
  // 5 s a query: the first answers in ~5 s, a second behind it in ~10 s,
  // both well within the minute's objective.
  const Nanos client_deadline = SteadyClock::Get()->Now() + 8 * kSecond;
  bool inline_answer = true;
  std::shared_ptr<Outcome> first = Send(&inline_answer, client_deadline);
  EXPECT_FALSE(inline_answer);
  std::shared_ptr<Outcome> second = Send(&inline_answer, client_deadline);
  ASSERT_TRUE(inline_answer) << "admitted past the client's deadline";
  {
    absl::MutexLock lock(&second->mu);
    EXPECT_EQ(second->status.code(), absl::StatusCode::kResourceExhausted) << second->status;
  }
  // Without a deadline of its own, the same query fits the objective.
  std::shared_ptr<Outcome> third = Send(&inline_answer);
  EXPECT_FALSE(inline_answer);
  ASSERT_EQ(worker_->timeouts().size(), 2u);
  EXPECT_LE(worker_->timeouts()[0], 8 * kSecond);
  EXPECT_GT(worker_->timeouts()[0], 7 * kSecond);
  EXPECT_GT(worker_->timeouts()[1], 59 * kSecond);
  worker_->Answer();
  for (const std::shared_ptr<Outcome>& outcome : {first, third}) {
    absl::MutexLock lock(&outcome->mu);
    EXPECT_TRUE(outcome->status.ok()) << outcome->status;
  }
}

WorkerType BurstType() {
  WorkerType type{"burst", 1, 4096, 0};
  type.market = WorkerType::Market::kBurst;
  type.price_per_request = 0.5;
  return type;
}

// The same instance, with a burst pool of one stand-in worker beside it.
class DispatcherBurstTest : public DispatcherAdmissionTest {
 protected:
  void SetUp() override {
    DispatcherAdmissionTest::SetUp();
    if (HasFatalFailure()) return;
    BurstPool::Options pool;
    pool.type = BurstType();
    pool.concurrency = 3;
    pool.busy_at = 100;
    pool.control = &control_;
    pool.cost = &cost_;
    pool.connect = [this](const std::string&, const std::string&) {
      return std::make_unique<Forward>(pool_worker_);
    };
    pool_ = std::make_unique<BurstPool>(pool);
    ASSERT_TRUE(pool_->cluster().AddWorker("burst", "b", 0, "").ok());
    MakeDispatcher(pool_.get());
  }

  // One query, whenever it is answered.
  std::shared_ptr<Outcome> Send() {
    bool answered_inline = false;
    return DispatcherAdmissionTest::Send(&answered_inline);
  }

  static bool Answered(Outcome& o) {
    absl::MutexLock lock(&o.mu);
    return o.answered;
  }

  std::shared_ptr<HoldingApi> pool_worker_ = std::make_shared<HoldingApi>();
  CostMeter cost_{WorkerTypeTable({BurstType()})};
  std::unique_ptr<BurstPool> pool_;
};

TEST_F(DispatcherBurstTest, WhatTheInstanceCannotAnswerInTimeGoesToThePool) {
  // Fill the provisioned instance: about a dozen fit in a minute. The
  // first query it does not take is the pool's.
  std::vector<std::shared_ptr<Outcome>> provisioned;
  std::shared_ptr<Outcome> first_bounced;
  for (int i = 0; i < 20 && first_bounced == nullptr; ++i) {
    std::shared_ptr<Outcome> o = Send();
    if (worker_->held() > provisioned.size()) {
      provisioned.push_back(o);
    } else {
      first_bounced = o;
    }
  }
  ASSERT_NE(first_bounced, nullptr) << "every query went to the provisioned instance";
  EXPECT_GE(provisioned.size(), 10u);
  EXPECT_LE(provisioned.size(), 13u);
  // The pool loads the variant on its worker (the cold start), then sends
  // the query there, not refused.
  ASSERT_FALSE(Answered(*first_bounced)) << "refused rather than sent to the pool";
  pool_worker_->AwaitHeld(1);
  EXPECT_EQ(pool_worker_->loads(), 1);
  EXPECT_FALSE(Answered(*first_bounced));
  // Two more fit the pool's concurrency of 3; the next is refused at once.
  std::shared_ptr<Outcome> second = Send(), third = Send();
  pool_worker_->AwaitHeld(3);
  std::shared_ptr<Outcome> refused = Send();
  {
    absl::MutexLock lock(&refused->mu);
    ASSERT_TRUE(refused->answered);
    EXPECT_EQ(refused->status.code(), absl::StatusCode::kResourceExhausted) << refused->status;
    // As without a pool: admission control's refusal.
    EXPECT_THAT(refused->status.message(), HasSubstr("model 'm'"));
  }
  EXPECT_EQ(worker_->held(), provisioned.size());  // none of them reached the instance
  EXPECT_EQ(refused_.Take()["a"], 4);  // the allocator sees the demand it did not carry
  EXPECT_EQ(pool_->stats().queries, 3);
  EXPECT_EQ(pool_->stats().full, 1);
  const CostReport cost = cost_.At(0);
  EXPECT_EQ(cost.lines[0].requests, 3);
  EXPECT_DOUBLE_EQ(cost.cost, 1.5);

  // The pool's worker answers its three; the pool has room again.
  pool_worker_->Answer(/*compute_us=*/4000, /*batch_size=*/2);
  for (const auto& o : {first_bounced, second, third}) {
    absl::MutexLock lock(&o->mu);
    ASSERT_TRUE(o->answered);
    EXPECT_TRUE(o->status.ok()) << o->status;
    EXPECT_EQ(o->worker, "b1");
  }
  EXPECT_TRUE(pool_->HasRoom());
  // The app is charged its three pool queries, and its half of each 4 ms
  // batch, to split the cluster's cost by.
  std::map<std::string, AppUsed> used = usage_.Snapshot();
  EXPECT_EQ(used["a"].requests_by_type["burst"], 3);
  EXPECT_NEAR(used["a"].compute_s, 0.006, 1e-12);
  std::shared_ptr<Outcome> later = Send();
  pool_worker_->AwaitHeld(1);
  EXPECT_EQ(pool_worker_->loads(), 1);  // warm now: no second load
  pool_worker_->Answer();
  worker_->Answer();
  for (const auto& o : provisioned) {
    absl::MutexLock lock(&o->mu);
    ASSERT_TRUE(o->answered);
    EXPECT_TRUE(o->status.ok()) << o->status;
    EXPECT_EQ(o->worker, "w1");
  }
  {
    absl::MutexLock lock(&later->mu);
    EXPECT_TRUE(later->status.ok()) << later->status;
  }
  // Each query the Bouncer admitted to the instance is tallied, answer
  // against estimate (policy::EstimateTally): all answered at once here,
  // against estimates of 5 s and more, so all under a quarter of it. The
  // pool's are not.
  const std::string scrape = metric_set_.Render();
  const std::string admitted = std::to_string(provisioned.size());
  EXPECT_THAT(scrape, HasSubstr("maitre_bouncer_answer_over_estimate_count " + admitted));
  EXPECT_THAT(scrape,
              HasSubstr("maitre_bouncer_answer_over_estimate_bucket{le=\"0.25\"} " + admitted));
  EXPECT_THAT(scrape, HasSubstr("maitre_bouncer_admitted_late_total 0"));
}

TEST_F(DispatcherBurstTest, APrewarmedPoolTakesTheOverflowWithoutALoad) {
  // What the cluster serves is loaded on the pool ahead of any overflow,
  // once: asked again while it loads or is ready, the pool loads nothing.
  const CatalogVariant* variant = world_.catalog.Get()->FindModel(kKey.model)->FindVariant(
      kKey.variant);
  ASSERT_NE(variant, nullptr);
  pool_->Prewarm({variant});
  pool_->Prewarm({variant});
  auto ready = [this] {
    for (const WorkerView& w : pool_->cluster().Snapshot()) {
      for (const InstanceView& inst : w.instances) {
        if (inst.key == kKey && inst.phase == InstancePhase::kReady) return true;
      }
    }
    return false;
  };
  while (!ready()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  pool_->Prewarm({variant});
  EXPECT_EQ(pool_worker_->loads(), 1);
  // The first query the instance cannot take goes to the pool's ready
  // instance at once: no cold start.
  std::shared_ptr<Outcome> bounced;
  for (int i = 0; i < 20 && bounced == nullptr; ++i) {
    const size_t before = worker_->held();
    std::shared_ptr<Outcome> o = Send();
    if (worker_->held() == before) bounced = o;
  }
  ASSERT_NE(bounced, nullptr) << "every query went to the provisioned instance";
  pool_worker_->AwaitHeld(1);
  EXPECT_EQ(pool_->stats().cold_starts, 0);
  EXPECT_EQ(pool_worker_->loads(), 1);
  pool_worker_->Answer();
  worker_->Answer();
  absl::MutexLock lock(&bounced->mu);
  EXPECT_TRUE(bounced->status.ok()) << bounced->status;
}

}  // namespace
}  // namespace maitre::controller
