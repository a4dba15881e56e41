// The dispatcher when a worker is lost under a query (docs/architecture.md,
// "When a worker is lost"): the query is sent again to another instance,
// loaded there if need be, never to the worker it was lost on; a load lost
// with its worker is not held against the variant; and while the provider's
// replacements are on their way, a query no worker can take waits for one.
// The workers are in-process stand-ins that answer or fail as told.
#include "controller/dataplane/dispatcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "controller/dataplane/dispatcher_testing.h"
#include "core/work_queue.h"

namespace maitre::controller {
namespace {

const VariantKey kKey{"m", "v"};

// A worker process in miniature: answers queries and loads, or fails them
// as an unreachable one does (UNAVAILABLE, as gRPC reports a dead peer).
struct StandIn {
  std::atomic<bool> dead{false};
  // Its loads fail as a worker's blob fetch does when the controller does
  // not know its session.
  std::atomic<bool> no_session{false};
  std::atomic<int> infers{0};
  std::atomic<int> loads{0};
};

class StandInApi final : public testing::ServingOnlyApi {
 public:
  explicit StandInApi(StandIn* worker) : worker_(worker) {}
  void Infer(const VariantKey&, std::shared_ptr<const std::vector<Tensor>>, const InferOptions&,
             WorkerReplyCallback done) override {
    ++worker_->infers;
    if (worker_->dead) return std::move(done)(absl::UnavailableError("Socket closed"));
    WorkerReply reply;
    reply.outputs.push_back({"logits", DataType::kFp32, {1, 10}, std::string(40, '\0')});
    std::move(done)(std::move(reply));
  }
  absl::StatusOr<LoadResult> Load(const VariantSpec&, int,
                                  const std::vector<LatencyPoint>&, int32_t) override {
    ++worker_->loads;
    if (worker_->dead) return absl::UnavailableError("failed to connect to all addresses");
    if (worker_->no_session) {
      return absl::UnauthenticatedError("fetching blob: the call does not carry the session token");
    }
    return LoadResult{1, 10};
  }

 private:
  StandIn* worker_;
};

class DispatcherWorkerLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::SetUpOneVariant(
                    dir_.File("registry.db"), kKey,
                    registry::test_util::MakeProfile(kKey.model, kKey.variant, "small").profile,
                    [this](const std::string& address, const std::string&) {
                      return std::make_unique<StandInApi>(&workers_[address]);
                    },
                    world_)
                    .ok());
    placer_ = std::make_unique<Placer>(Placer::Options{world_.cluster.get(), &control_});
  }

  void MakeDispatcher(int min_workers = 0, Nanos timeout = 20 * kSecond) {
    Dispatcher::Options options;
    options.catalog = &world_.catalog;
    options.cluster = world_.cluster.get();
    options.placer = placer_.get();
    options.default_timeout = timeout;
    options.min_workers = min_workers;
    dispatcher_ = std::make_unique<Dispatcher>(options);
  }

  // Registers the stand-in at `address`; with `loaded`, kKey is ready there.
  std::string AddWorker(const std::string& address, bool loaded) {
    workers_[address];  // exists before the cluster connects to it
    auto id = world_.cluster->AddWorker("small", address, 0, "");
    EXPECT_TRUE(id.ok()) << id.status();
    if (loaded) {
      EXPECT_TRUE(world_.cluster->BeginLoad(*id, kKey, nullptr).ok());
      world_.cluster->FinishLoad(*id, kKey, absl::OkStatus());
    }
    return *id;
  }

  // Sends one query (an image) for model m; `done` gets its answer.
  void Send(InferDone done) {
    InferRequest request;
    request.inputs.push_back(
        {"input", DataType::kFp32, {1, 1, 28, 28}, std::string(784 * 4, '\0')});
    dispatcher_->Infer({"", kKey.model, ""}, std::move(request), SteadyClock::Get()->Now(),
                       std::move(done));
  }

  // Sends one query and waits for its answer.
  absl::StatusOr<InferResponse> Query() {
    absl::Notification answered;
    absl::StatusOr<InferResponse> result;
    Send([&](absl::StatusOr<InferResponse> r) {
      result = std::move(r);
      answered.Notify();
    });
    answered.WaitForNotification();
    return result;
  }

  bool Unreachable(const std::string& id) {
    for (const WorkerView& w : world_.cluster->Snapshot()) {
      if (w.id == id) return w.unreachable;
    }
    return false;
  }

  registry::test_util::TempDir dir_;
  std::map<std::string, StandIn> workers_;  // by address; never erased, so stable
  testing::OneVariant world_;
  WorkQueue control_{1};
  std::unique_ptr<Placer> placer_;
  std::unique_ptr<Dispatcher> dispatcher_;
};

TEST_F(DispatcherWorkerLossTest, AQueryLostWithItsWorkerIsServedElsewhereAndNeverSentBack) {
  MakeDispatcher();
  const std::string lost = AddWorker("lost", /*loaded=*/true);
  const std::string other = AddWorker("other", /*loaded=*/false);
  workers_["lost"].dead = true;

  absl::StatusOr<InferResponse> answer = Query();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->timings.worker, other);
  EXPECT_EQ(workers_["lost"].infers, 1);
  EXPECT_EQ(workers_["other"].loads, 1);  // loaded there for the query
  EXPECT_TRUE(Unreachable(lost));
  // Later queries go straight to the other worker.
  for (int i = 0; i < 3; ++i) {
    answer = Query();
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->timings.worker, other);
  }
  EXPECT_EQ(workers_["lost"].infers, 1);
}

TEST_F(DispatcherWorkerLossTest,
       ALoadLostWithItsWorkerIsTriedElsewhereAndNotHeldAgainstTheVariant) {
  MakeDispatcher();
  const std::string lost = AddWorker("lost", /*loaded=*/false);  // the first choice: lowest id
  const std::string other = AddWorker("other", /*loaded=*/false);
  workers_["lost"].dead = true;

  absl::StatusOr<InferResponse> answer = Query();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->timings.worker, other);
  EXPECT_EQ(workers_["lost"].loads, 1);
  EXPECT_EQ(workers_["lost"].infers, 0);
  EXPECT_TRUE(Unreachable(lost));
  EXPECT_FALSE(world_.cluster->LastLoadFailure(kKey).has_value());
}

TEST_F(DispatcherWorkerLossTest, ALoadRefusedForTheWorkersSessionIsTriedElsewhere) {
  MakeDispatcher();
  const std::string refused = AddWorker("refused", /*loaded=*/false);  // the first choice
  const std::string other = AddWorker("other", /*loaded=*/false);
  workers_["refused"].no_session = true;

  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<InferResponse> answer = Query();
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->timings.worker, other);
  }
  EXPECT_EQ(workers_["refused"].loads, 1);
  EXPECT_TRUE(Unreachable(refused));
  EXPECT_FALSE(world_.cluster->LastLoadFailure(kKey).has_value());
}

TEST_F(DispatcherWorkerLossTest, WithNoWorkerLeftAQueryWaitsForTheReplacement) {
  MakeDispatcher(/*min_workers=*/1);
  AddWorker("lost", /*loaded=*/true);
  workers_["lost"].dead = true;
  absl::Notification answered;
  absl::StatusOr<InferResponse> answer;
  Send([&](absl::StatusOr<InferResponse> r) {
    answer = std::move(r);
    answered.Notify();
  });
  // The stand-in fails at once, so by now the query was lost there and,
  // with nothing else to take it, waits rather than being answered.
  EXPECT_EQ(workers_["lost"].infers, 1);
  ASSERT_FALSE(answered.HasBeenNotified()) << answer.status();
  const std::string replacement = AddWorker("replacement", /*loaded=*/false);
  answered.WaitForNotification();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->timings.worker, replacement);
}

TEST_F(DispatcherWorkerLossTest, AQueryWhoseDeadlinePassesWhileItWaitsSaysWhatItWaitedFor) {
  MakeDispatcher(/*min_workers=*/1, /*timeout=*/200 * kMillisecond);
  AddWorker("lost", /*loaded=*/true);
  workers_["lost"].dead = true;
  absl::StatusOr<InferResponse> answer = Query();  // no replacement ever joins
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kDeadlineExceeded) << answer.status();
  EXPECT_THAT(std::string(answer.status().message()),
              ::testing::HasSubstr(
                  "before any instance answered it; it was waiting for a worker to join"));
}

TEST_F(DispatcherWorkerLossTest, WithNoReplacementComingAQueryIsRefusedAtOnce) {
  MakeDispatcher(/*min_workers=*/0);
  AddWorker("lost", /*loaded=*/true);
  workers_["lost"].dead = true;
  absl::StatusOr<InferResponse> answer = Query();
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable) << answer.status();
}

// Unloading drains (docs/architecture.md, "Unloading drains"): a worker
// that holds the queries it was sent until the test lets them run, and on
// Unload answers those it still holds NOT_FOUND, as a worker's instance did
// when stopped (worker/instance.h).
class HoldingApi final : public testing::ServingOnlyApi {
 public:
  void Infer(const VariantKey&, std::shared_ptr<const std::vector<Tensor>>, const InferOptions&,
             WorkerReplyCallback done) override {
    absl::MutexLock lock(&mu_);
    if (open_) return Answer(std::move(done));
    held_.push_back(std::move(done));
  }
  absl::StatusOr<LoadResult> Load(const VariantSpec&, int,
                                  const std::vector<LatencyPoint>&, int32_t) override {
    absl::MutexLock lock(&mu_);
    ++loads_;
    return LoadResult{1, 10};
  }
  absl::Status Unload(const VariantKey& key) override {
    std::vector<WorkerReplyCallback> handed_back;
    {
      absl::MutexLock lock(&mu_);
      ++unloads_;
      held_at_unload_ += static_cast<int>(held_.size());
      handed_back.swap(held_);
    }
    for (auto& done : handed_back) {
      std::move(done)(absl::NotFoundError(absl::StrCat(key.ToString(), " was unloaded")));
    }
    return absl::OkStatus();
  }
  // Answers what it holds, and from now on answers at once.
  void Open() {
    std::vector<WorkerReplyCallback> held;
    {
      absl::MutexLock lock(&mu_);
      open_ = true;
      held.swap(held_);
    }
    for (auto& done : held) Answer(std::move(done));
  }
  int held() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(held_.size());
  }
  int loads() {
    absl::MutexLock lock(&mu_);
    return loads_;
  }
  int unloads() {
    absl::MutexLock lock(&mu_);
    return unloads_;
  }
  int held_at_unload() {
    absl::MutexLock lock(&mu_);
    return held_at_unload_;
  }

 private:
  static void Answer(WorkerReplyCallback done) {
    WorkerReply reply;
    reply.outputs.push_back({"logits", DataType::kFp32, {1, 10}, std::string(40, '\0')});
    std::move(done)(std::move(reply));
  }

  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<WorkerReplyCallback> held_ ABSL_GUARDED_BY(mu_);
  int loads_ ABSL_GUARDED_BY(mu_) = 0;
  int unloads_ ABSL_GUARDED_BY(mu_) = 0;
  int held_at_unload_ ABSL_GUARDED_BY(mu_) = 0;
};

class DispatcherUnloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::SetUpOneVariant(
                    dir_.File("registry.db"), kKey,
                    registry::test_util::MakeProfile(kKey.model, kKey.variant, "small").profile,
                    [this](const std::string&, const std::string&) {
                      return std::make_unique<Forward>(&worker_);
                    },
                    world_)
                    .ok());
    placer_ = std::make_unique<Placer>(Placer::Options{world_.cluster.get(), &control_});
    Dispatcher::Options options;
    options.catalog = &world_.catalog;
    options.cluster = world_.cluster.get();
    options.placer = placer_.get();
    options.default_timeout = 20 * kSecond;
    options.admission_control = false;
    dispatcher_ = std::make_unique<Dispatcher>(options);
    auto id = world_.cluster->AddWorker("small", "w", 0, "");
    ASSERT_TRUE(id.ok()) << id.status();
    worker_id_ = *id;
    ASSERT_TRUE(world_.cluster->BeginLoad(worker_id_, kKey, nullptr).ok());
    world_.cluster->FinishLoad(worker_id_, kKey, absl::OkStatus());
  }

  // The cluster's WorkerApi for the one worker, forwarding to the test's.
  class Forward final : public testing::ServingOnlyApi {
   public:
    explicit Forward(HoldingApi* to) : to_(to) {}
    void Infer(const VariantKey& key, std::shared_ptr<const std::vector<Tensor>> inputs,
               const InferOptions& options, WorkerReplyCallback done) override {
      to_->Infer(key, std::move(inputs), options, std::move(done));
    }
    absl::StatusOr<LoadResult> Load(const VariantSpec& spec, int replicas,
                                    const std::vector<LatencyPoint>& profile,
                                    int32_t max_batch) override {
      return to_->Load(spec, replicas, profile, max_batch);
    }
    absl::Status Unload(const VariantKey& key) override { return to_->Unload(key); }

   private:
    HoldingApi* to_;
  };

  // Waits until the control queue has run everything posted so far.
  void Settle() {
    absl::Notification done;
    control_.Post([&done] { done.Notify(); });
    done.WaitForNotification();
  }

  InstancePhase Phase() {
    for (const WorkerView& w : world_.cluster->Snapshot()) {
      for (const InstanceView& inst : w.instances) {
        if (inst.key == kKey) return inst.phase;
      }
    }
    return InstancePhase::kFailed;  // gone
  }

  registry::test_util::TempDir dir_;
  HoldingApi worker_;
  testing::OneVariant world_;
  WorkQueue control_{1};
  std::unique_ptr<Placer> placer_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::string worker_id_;
};

TEST_F(DispatcherUnloadTest, AnInstanceUnloadedWithQueriesInFlightAnswersThemAllFirst) {
  // 32 queries in flight on the worker's instance when it is unloaded.
  constexpr int kQueries = 32;
  absl::Mutex mu;
  int answered = 0, ok = 0;
  std::map<std::string, int> failures;
  for (int i = 0; i < kQueries; ++i) {
    InferRequest request;
    request.inputs.push_back(
        {"input", DataType::kFp32, {1, 1, 28, 28}, std::string(784 * 4, '\0')});
    dispatcher_->Infer({"", kKey.model, ""}, std::move(request), SteadyClock::Get()->Now(),
                       [&](absl::StatusOr<InferResponse> r) {
                         absl::MutexLock lock(&mu);
                         ++answered;
                         if (r.ok()) {
                           ++ok;
                         } else {
                           ++failures[r.status().ToString()];
                         }
                       });
  }
  ASSERT_EQ(worker_.held(), kQueries);

  placer_->Unload(worker_id_, kKey);
  Settle();
  // It takes no new query, and the worker is not told to unload it while
  // it holds some.
  EXPECT_EQ(Phase(), InstancePhase::kUnloading);
  EXPECT_EQ(worker_.unloads(), 0);

  // The instance answers what it holds; then it is unloaded.
  worker_.Open();
  Settle();
  EXPECT_EQ(worker_.unloads(), 1);
  EXPECT_EQ(worker_.held_at_unload(), 0);  // nothing was handed back
  EXPECT_EQ(worker_.loads(), 0);           // nor the variant loaded again for it
  EXPECT_EQ(Phase(), InstancePhase::kFailed) << "the instance should be gone";
  absl::MutexLock lock(&mu);
  EXPECT_EQ(answered, kQueries);
  EXPECT_EQ(ok, kQueries);
  EXPECT_TRUE(failures.empty()) << failures.begin()->first;
}

TEST_F(DispatcherUnloadTest, AnIdleInstanceIsUnloadedAtOnce) {
  placer_->Unload(worker_id_, kKey);
  Settle();
  EXPECT_EQ(worker_.unloads(), 1);
  EXPECT_EQ(Phase(), InstancePhase::kFailed) << "the instance should be gone";
}

}  // namespace
}  // namespace maitre::controller
