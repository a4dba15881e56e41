// End-to-end: no request the server accepted is lost (docs/architecture.md,
// "When a worker is lost" and "Shutting down"). A worker killed with SIGKILL
// under 200 queries/s costs no query: each it held is sent again to another
// instance. A spot interruption notice costs none either. SIGTERM answers
// every query in flight before the server exits 0, refusing new connections
// meanwhile.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "http/client.h"
#include "loadgen/bench.h"
#include "runtime/testing/zoo.h"
#include "testing/server_process.h"
#include "testing/wait.h"
#include "testing/zoo_requests.h"

namespace maitre {
namespace {

using nlohmann::json;
using runtime::testing::ScopedTempDir;
using testing::ServerOptions;
using testing::ServerProcess;

constexpr char kModel[] = "fmnist-mlp";
constexpr char kSlowLoadingModel[] = "fmnist-cnn-wide";

// Stops processes with SIGSTOP (waiting until every thread has stopped)
// and lets them go on when thawed or destroyed.
class Frozen {
 public:
  explicit Frozen(std::vector<pid_t> pids) : pids_(std::move(pids)) {
    for (pid_t pid : pids_) kill(pid, SIGSTOP);
    for (pid_t pid : pids_) {
      stopped_ &= testing::WaitUntil([&] { return testing::AllThreadsStopped(pid); }, 120);
    }
  }
  ~Frozen() { Thaw(); }
  bool stopped() const { return stopped_; }
  void Thaw() {
    for (pid_t pid : pids_) kill(pid, SIGCONT);
    pids_.clear();
  }

 private:
  std::vector<pid_t> pids_;
  bool stopped_ = true;
};

class ResilienceTest : public ::testing::Test {
 protected:
  // A server with `workers` (by default one cpu-1, one cpu-2) and `model`
  // registered.
  void StartServing(const std::string& model, std::vector<std::string> extra_args,
                    const std::string& workers = "cpu-1:1,cpu-2:1") {
    auto zoo = runtime::testing::LoadZoo();
    ASSERT_TRUE(zoo.ok()) << zoo.status();
    valset_ = *runtime::testing::ZooValset();
    const std::string valset_path = dir_.path() + "/valset.npz";
    ASSERT_TRUE(testing::WriteValsetSlice(*valset_, 300, valset_path).ok());
    ServerOptions options;
    options.data_dir = dir_.path() + "/data";
    options.extra_args = std::move(extra_args);
    options.workers = workers;
    auto started = ServerProcess::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    for (const auto& m : *zoo) {
      if (m.name != model) continue;
      auto r = server_->Register("fashion", m.name, m.torchscript, m.onnx, valset_path);
      ASSERT_TRUE(r.ok() && r->status / 100 == 2) << (r.ok() ? r->body : r.status().ToString());
    }
  }

  // The worker (id and pid) whose instances of `model` serve the most, by
  // the last reports; none while nothing is served.
  std::pair<std::string, pid_t> BusiestWorker(const std::string& model) {
    auto index = server_->RepositoryIndex();
    if (!index.ok()) return {};
    std::map<std::string, double> served;
    for (const json& m : (*index)["models"]) {
      if (m["name"] != model) continue;
      for (const json& inst : m["instances"]) {
        served[inst["worker"].get<std::string>()] += inst["served_qps"].get<double>();
      }
    }
    std::pair<std::string, pid_t> busiest;
    double most = 0;
    for (const json& w : (*index)["workers"]) {
      const std::string id = w["id"].get<std::string>();
      if (served[id] > most) {
        most = served[id];
        busiest = {id, server_->WorkerPid(id).value_or(0)};
      }
    }
    return busiest;
  }

  // A worker (id and pid) holding an instance of `model` in `phase`; none
  // if there is none.
  std::pair<std::string, pid_t> WorkerWith(const std::string& model, const std::string& phase) {
    auto index = server_->RepositoryIndex();
    if (!index.ok()) return {};
    std::string id;
    for (const json& m : (*index)["models"]) {
      for (const json& inst : m["instances"]) {
        if (m["name"] == model && inst["phase"] == phase) id = inst["worker"].get<std::string>();
      }
    }
    for (const json& w : (*index)["workers"]) {
      if (!id.empty() && w["id"] == id) return {id, server_->WorkerPid(id).value_or(0)};
    }
    return {};
  }

  // `model` at `rate_qps` for `duration_s`, sent on a thread of its own
  // from Start until Join; `answered` and `running` follow it.
  struct BackgroundLoad {
    std::atomic<int64_t> answered{0};
    std::atomic<bool> running{true};
    absl::StatusOr<loadgen::BenchReport> report;
    std::thread thread;
    void Start(const std::string& url, const std::string& model, double rate_qps,
               double duration_s) {
      loadgen::BenchOptions bench;
      bench.model = model;
      Start(url, std::move(bench), rate_qps, duration_s);
    }
    // The same with `bench`'s target and objective.
    void Start(const std::string& url, loadgen::BenchOptions bench, double rate_qps,
               double duration_s) {
      bench.server = url;
      bench.rate_qps = rate_qps;
      bench.duration_s = duration_s;
      bench.progress = [this](const loadgen::Progress& p) { answered = p.answered; };
      thread = std::thread([this, bench] {
        report = loadgen::RunBench(bench);
        running = false;
      });
    }
    void Join() { thread.join(); }
  };

  // Every query the load started was answered: none failed, none is left.
  void ExpectNoneLost(const loadgen::BenchReport& report) {
    std::cerr << report.ok << " of " << report.started << " queries answered, " << report.failed
              << " failed, " << report.unfinished << " unfinished, p99 "
              << report.latency_ms.p99 << " ms\n";
    for (const loadgen::ErrorCount& e : report.errors) {
      ADD_FAILURE() << e.count << " x " << e.kind << ": " << e.example;
    }
    EXPECT_EQ(report.failed, 0) << server_->Log();
    EXPECT_EQ(report.unfinished, 0);
    EXPECT_EQ(report.ok, report.started);
  }

  ScopedTempDir dir_;
  const Valset* valset_ = nullptr;
  std::unique_ptr<ServerProcess> server_;
};

// Workers are killed with SIGKILL while 200 queries/s arrive: first the one
// loading the model for the first queries (they wait on that load), then,
// once answers flow again, the one serving them. The queries each worker
// held, and those sent to it before the controller knew, are sent to another
// instance (loaded there if need be). Not one fails.
TEST_F(ResilienceTest, KillingWorkersUnderLoadFailsNoQuery) {
  // A model whose load takes long enough (about a second) to be caught.
  StartServing(kSlowLoadingModel, {});
  if (HasFatalFailure()) return;

  BackgroundLoad load;
  load.Start(server_->url(), kSlowLoadingModel, 200, 20);
  std::atomic<int64_t>& answered = load.answered;
  std::atomic<bool>& loading = load.running;
  // The worker the first queries' load goes to, while it loads. The poll is
  // finer than WaitUntil's: the load takes about a second.
  std::pair<std::string, pid_t> loader;
  for (int polls = 0; loader.second == 0 && loading.load() && polls < 30000; ++polls) {
    loader = WorkerWith(kSlowLoadingModel, "loading");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool killed_loader = loader.second > 0 && kill(loader.second, SIGKILL) == 0;
  // Then the worker serving most, once a second of answers came after that.
  const int64_t answered_at_first_kill = answered.load();
  std::pair<std::string, pid_t> server;
  auto serving_again = [&] {
    if (answered.load() < answered_at_first_kill + 200) return false;
    server = BusiestWorker(kSlowLoadingModel);
    return server.second > 0;
  };
  const bool found = killed_loader && testing::WaitUntil(serving_again, 300);
  const bool killed_server = found && loading.load() && kill(server.second, SIGKILL) == 0;
  load.Join();
  ASSERT_TRUE(killed_loader) << "no worker was seen loading " << kSlowLoadingModel << "\n"
                             << server_->Log();
  ASSERT_TRUE(killed_server) << "no worker was seen serving " << kSlowLoadingModel
                             << " while the load went on\n"
                             << server_->Log();
  ASSERT_TRUE(load.report.ok()) << load.report.status();
  std::cerr << "killed " << loader.first << " (pid " << loader.second << ") while it loaded the "
            << "model, then " << server.first << " (pid " << server.second << ") while it served "
            << "it; ";
  ExpectNoneLost(*load.report);
  // Both were replaced.
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        auto pids = server_->WorkerPids();
        return pids.ok() && pids->size() == 2 &&
               std::find(pids->begin(), pids->end(), loader.second) == pids->end() &&
               std::find(pids->begin(), pids->end(), server.second) == pids->end();
      },
      180));
  EXPECT_TRUE(server_->Stop().ok());
}

// A spot interruption notice under 100 queries/s (docs/operations.md, "Spot
// interruptions"): the worker serving most gets a notice 15 s ahead through
// the admin call. While it still runs, it keeps taking queries beside the
// worker that stays, as MArk's spot instances serve through their notice,
// and its replacement joins; it drains in its last second and is killed
// when the lead runs out. Not one query fails, and the cost endpoint counts
// the ended worker.
TEST_F(ResilienceTest, ASpotInterruptionUnderLoadFailsNoQuery) {
  StartServing(kModel,
               {"--worker-types", "cpu-1:1:4096:0.0425:0:spot,cpu-2:2:8192:0.085:0:spot"});
  if (HasFatalFailure()) return;
  // Bad calls are refused before anything happens.
  auto unknown = server_->Post("/v2/cluster/workers/nobody/interrupt", "");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  auto bad_lead = server_->Post("/v2/cluster/workers/nobody/interrupt?lead_s=soon", "");
  ASSERT_TRUE(bad_lead.ok());
  EXPECT_EQ(bad_lead->status, 400) << bad_lead->body;

  // The load names one variant. Left to choose, the router may move every
  // query to a quicker variant loaded elsewhere (one whose profile lands
  // just after the notice), and then the leaving worker rightly gets none:
  // that says nothing about whether it is still offered queries.
  BackgroundLoad load;
  load.Start(server_->url(), absl::StrCat(kModel, ":torch"), 100, 40);
  std::atomic<int64_t>& answered = load.answered;
  std::atomic<bool>& loading = load.running;
  std::pair<std::string, pid_t> victim;
  auto serving = [&] {
    if (answered.load() < 200) return false;
    victim = BusiestWorker(kModel);
    return victim.second > 0;
  };
  const bool found = testing::WaitUntil(serving, 300) && loading.load();
  absl::StatusOr<http::Response> notice;
  if (found) {
    notice = server_->Post(
        absl::StrCat("/v2/cluster/workers/", victim.first, "/interrupt?lead_s=15"), "");
  }
  // While it still runs, with its replacement joined beside it and a report
  // made 2 s or more after the notice (200 queries later), its instance is
  // ready and that report shows queries arriving: it still takes its share.
  const int64_t answered_at_notice = answered.load();
  bool ended_first = false;  // the lead ran out before that was seen
  auto serves_while_leaving = [&] {
    if (kill(victim.second, 0) != 0) return ended_first = true;
    if (answered.load() < answered_at_notice + 200) return false;
    auto index = server_->RepositoryIndex();
    bool ready = false;
    double arrivals = 0;
    if (index.ok()) {
      for (const json& m : (*index)["models"]) {
        for (const json& inst : m["instances"]) {
          if (inst["worker"] != victim.first) continue;
          ready |= m["name"] == kModel && inst["phase"] == "ready";
          arrivals += inst["arrival_qps"].get<double>();
        }
      }
    }
    return index.ok() && ready && arrivals > 0 && (*index)["workers"].size() == 3;
  };
  const bool left =
      found && notice.ok() && testing::WaitUntil(serves_while_leaving, 300) && !ended_first;
  // The worker ends, and answers go on after it.
  int64_t answered_at_end = 0;
  auto replaced = [&] {
    auto pids = server_->WorkerPids();
    if (!pids.ok() || pids->size() != 2 ||
        std::find(pids->begin(), pids->end(), victim.second) != pids->end()) {
      return false;
    }
    if (answered_at_end == 0) answered_at_end = answered.load();
    return answered.load() >= answered_at_end + 100 || !loading.load();
  };
  const bool went_on = left && testing::WaitUntil(replaced, 300);
  const bool during_load = loading.load();
  load.Join();
  ASSERT_TRUE(found) << "no worker was seen serving " << kModel << "\n" << server_->Log();
  ASSERT_TRUE(notice.ok()) << notice.status();
  ASSERT_EQ(notice->status, 202) << notice->body;
  ASSERT_TRUE(left) << "the interrupted worker got no more queries, or no replacement joined "
                       "before it stopped\n"
                    << server_->Log();
  ASSERT_TRUE(went_on) << "the interrupted worker did not end\n" << server_->Log();
  EXPECT_TRUE(during_load) << "the load ended before the replacement: lengthen it";
  ASSERT_TRUE(load.report.ok()) << load.report.status();
  std::cerr << "interrupted " << victim.first << " (pid " << victim.second << ") 15 s ahead; ";
  ExpectNoneLost(*load.report);
  EXPECT_TRUE(absl::StrContains(server_->Log(), "interrupted: it stops in 15 s"))
      << server_->Log();

  auto cost = server_->GetJson("/v2/cluster/cost");
  ASSERT_TRUE(cost.ok()) << cost.status();
  int ended = 0, running = 0;
  for (const json& line : (*cost)["types"]) {
    EXPECT_EQ(line["market"], "spot");
    ended += line["ended"].get<int>();
    running += line["running"].get<int>();
  }
  EXPECT_EQ(ended, 1) << cost->dump();
  EXPECT_EQ(running, 2) << cost->dump();
  EXPECT_GT((*cost)["cost"].get<double>(), 0);
  EXPECT_NEAR((*cost)["per_hour"].get<double>(), 0.0425 + 0.085, 1e-9) << cost->dump();
  EXPECT_TRUE(server_->Stop().ok());
}

// A spot price trace is checked before the server starts (a bad one stops
// it with the file, line and problem) and, once serving, prices the cost
// report: the trace's $0.02/h from 1 ms after the start, not the list
// price.
TEST_F(ResilienceTest, APriceTraceIsCheckedAtStartAndPricesTheCost) {
  const std::string bad = dir_.path() + "/bad.csv";
  const std::string good = dir_.path() + "/good.csv";
  ASSERT_TRUE(WriteFileAtomically(bad, "time_s,price_per_hour\n0,0.01\n60,-0.5\n").ok());
  ASSERT_TRUE(WriteFileAtomically(good, "0,0.5\n0.001,0.02\n").ok());
  ServerOptions options;
  options.data_dir = dir_.path() + "/data";
  options.workers = "cpu-1:1";
  options.extra_args = {"--worker-types", "cpu-1:1:4096:0.0425:0:spot", "--price-traces",
                        "cpu-1=" + bad};
  auto refused = ServerProcess::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "bad.csv, line 3: the price must be finite and not negative"))
      << refused.status();

  options.extra_args.back() = "cpu-1=" + good;
  auto started = ServerProcess::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = *std::move(started);
  auto cost = server_->GetJson("/v2/cluster/cost");
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_DOUBLE_EQ((*cost)["per_hour"].get<double>(), 0.02) << cost->dump();
  EXPECT_EQ((*cost)["types"][0]["market"], "spot");
  EXPECT_TRUE(server_->Stop().ok());
}

// What the workers cost is kept across a restart: the second run's
// GET /v2/cluster/cost counts the first run's workers in its history.
TEST_F(ResilienceTest, TheCostOfEarlierRunsSurvivesARestart) {
  ServerOptions options;
  options.data_dir = dir_.path() + "/data";
  options.workers = "cpu-1:1";
  // Hour-long billing blocks: a worker pays one whole block when it starts.
  options.extra_args = {"--worker-types", "cpu-1:1:4096:0.0425:3600"};
  auto first = ServerProcess::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  auto first_cost = (*first)->GetJson("/v2/cluster/cost");
  ASSERT_TRUE(first_cost.ok()) << first_cost.status();
  EXPECT_EQ((*first_cost)["history"]["runs"], 1) << first_cost->dump();
  ASSERT_TRUE((*first)->Stop().ok());

  auto second = ServerProcess::Start(options);
  ASSERT_TRUE(second.ok()) << second.status();
  server_ = *std::move(second);
  auto cost = server_->GetJson("/v2/cluster/cost");
  ASSERT_TRUE(cost.ok()) << cost.status();
  const nlohmann::json& history = (*cost)["history"];
  EXPECT_EQ(history["runs"], 2) << cost->dump();
  // The first run's worker paid its block; so does this run's.
  EXPECT_GE(history["cost"].get<double>() - (*cost)["cost"].get<double>(), 0.0425 - 1e-9)
      << cost->dump();
  EXPECT_GE(history["types"][0]["workers"].get<int>(), 2) << cost->dump();
  EXPECT_TRUE(server_->Stop().ok());
}

// An interruption notice for the only worker: nothing else can serve until
// its replacement has joined and loaded the model, and it serves on
// (docs/operations.md, "Spot interruptions") beside the replacement, which
// takes over when it drains before it stops. With `mark`, the app's first
// queries, before the allocator has loaded anything, load the model
// themselves (a cold start: docs/policies.md, "Provisioning ahead of demand
// (MArk)") and are answered.
class OneSpotWorkerTest : public ResilienceTest,
                          public ::testing::WithParamInterface<std::string> {
 protected:
  // App queries at a 200 ms objective: a query that waited for the
  // replacement (a worker start and a load, seconds) would fail.
  static constexpr double kObjectiveMs = 200;

  // The app's queries at `rate_qps` for `duration_s`, at `latency_ms` if set.
  static loadgen::BenchOptions AppQueries(std::optional<double> latency_ms) {
    loadgen::BenchOptions bench;
    bench.app = "fashion";
    bench.latency_ms = latency_ms;
    return bench;
  }
};

TEST_P(OneSpotWorkerTest, AnInterruptionNoticeFailsNoQuery) {
  // One profiling sweep makes a profile final: the test waits for final
  // profiles (so no load queues behind a sweep), not for their accuracy.
  std::vector<std::string> args = {"--worker-types", "cpu-1:1:4096:0.0425:0:spot",
                                   "--profile-sweeps", "1"};
  if (GetParam() == "mark") {
    for (const char* a : {"--allocator", "mark", "--mark-launch-s", "5", "--max-workers", "cpu-1:2"}) {
      args.push_back(a);
    }
  }
  StartServing(kModel, args, "cpu-1:1");
  if (HasFatalFailure()) return;
  ASSERT_TRUE(server_->AwaitProfiles("fashion").ok()) << server_->Log();

  // The first queries, before anything is loaded: best effort (no
  // objective), so they may wait for the load they start. Under mark they
  // were refused until its first round loaded the model.
  {
    BackgroundLoad first;
    first.Start(server_->url(), AppQueries(std::nullopt), 20, 3);
    first.Join();
    ASSERT_TRUE(first.report.ok()) << first.report.status();
    std::cerr << "the first queries under " << GetParam() << ": ";
    ExpectNoneLost(*first.report);
    EXPECT_GT(first.report->started, 30);
  }

  BackgroundLoad load;
  load.Start(server_->url(), AppQueries(kObjectiveMs), 50, 45);
  std::atomic<int64_t>& answered = load.answered;
  std::atomic<bool>& loading = load.running;
  std::pair<std::string, pid_t> victim;
  auto serving = [&] {
    if (answered.load() < 200) return false;
    victim = BusiestWorker(kModel);
    return victim.second > 0;
  };
  const bool found = testing::WaitUntil(serving, 300) && loading.load();
  absl::StatusOr<http::Response> notice;
  if (found) {
    notice = server_->Post(
        absl::StrCat("/v2/cluster/workers/", victim.first, "/interrupt?lead_s=15"), "");
  }
  // It ends, its replacement alone serves, and answers go on after it.
  int64_t answered_at_end = 0;
  auto replaced = [&] {
    auto pids = server_->WorkerPids();
    if (!pids.ok() || pids->size() != 1 || pids->front() == victim.second) return false;
    if (answered_at_end == 0) answered_at_end = answered.load();
    return answered.load() >= answered_at_end + 100 || !loading.load();
  };
  const bool went_on = found && notice.ok() && testing::WaitUntil(replaced, 300);
  const bool during_load = loading.load();
  load.Join();
  ASSERT_TRUE(found) << "no worker was seen serving " << kModel << "\n" << server_->Log();
  ASSERT_TRUE(notice.ok()) << notice.status();
  ASSERT_EQ(notice->status, 202) << notice->body;
  ASSERT_TRUE(went_on) << "the interrupted worker was not replaced\n" << server_->Log();
  EXPECT_TRUE(during_load) << "the load ended before the replacement: lengthen it";
  ASSERT_TRUE(load.report.ok()) << load.report.status();
  std::cerr << "interrupted the only worker " << victim.first << " (pid " << victim.second
            << ") 15 s ahead, under " << GetParam() << "; ";
  ExpectNoneLost(*load.report);
  EXPECT_TRUE(absl::StrContains(server_->Log(), "interrupted: it stops in 15 s"))
      << server_->Log();
  EXPECT_TRUE(server_->Stop().ok());
}

INSTANTIATE_TEST_SUITE_P(Allocators, OneSpotWorkerTest, ::testing::Values("infaas", "mark"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// MArk's burst pool (docs/architecture.md, "The burst pool"): the app's
// queries at a 20 ms objective, open loop, at about twice what its one
// cpu-1 worker answers in time. What that worker cannot answer before a
// query's deadline goes to the pool's own worker process, which answers
// it, and each such query is charged; the rest of the overload is refused
// at once (429) or answered at its deadline (504). No query is left
// unanswered or answered 500, and the server serves on.
TEST_F(ResilienceTest, OverflowGoesToTheBurstPool) {
  StartServing(kSlowLoadingModel,
               {"--profile-sweeps", "1", "--burst-pool", "warm=1,max=1,concurrency=16"},
               "cpu-1:1");
  if (HasFatalFailure()) return;
  ASSERT_TRUE(server_->AwaitProfiles("fashion").ok()) << server_->Log();
  auto pool_state = [&]() -> json {
    auto r = server_->Get("/v2/cluster/burst-pool");
    return r.ok() && r->status == 200 ? json::parse(r->body) : json{};
  };
  auto pool_workers = [&] { return pool_state().value("workers", json::array()).size(); };
  ASSERT_TRUE(testing::WaitUntil([&] { return pool_workers() == 1; }, 300))
      << "the pool's warm worker did not join\n" << server_->Log();

  loadgen::BenchOptions bench;
  bench.app = "fashion";
  bench.latency_ms = 20;
  BackgroundLoad load;
  load.Start(server_->url(), bench, 5000, 10);
  load.Join();
  ASSERT_TRUE(load.report.ok()) << load.report.status();
  const loadgen::BenchReport& report = *load.report;
  const json pool = pool_state();
  std::cerr << report.ok << " of " << report.started << " answered in time; the pool took "
            << pool.value("queries", 0) << " and answered " << pool.value("answered", 0)
            << " (" << pool.value("cold_starts", 0) << " waited for its load, "
            << pool.value("full", 0) << " found it full)\n";
  EXPECT_GT(pool.value("answered", 0), 0) << pool.dump() << "\n" << server_->Log();
  EXPECT_EQ(report.unfinished, 0);
  for (const loadgen::ErrorCount& e : report.errors) {
    EXPECT_TRUE(absl::StrContains(e.kind, "429") || absl::StrContains(e.kind, "504"))
        << e.count << " x " << e.kind << ": " << e.example;
  }
  // Each query the pool took is charged its price per request.
  auto cost = server_->Get("/v2/cluster/cost");
  ASSERT_TRUE(cost.ok() && cost->status == 200) << (cost.ok() ? cost->body : "");
  bool charged = false;
  const json costs = json::parse(cost->body);
  for (const json& line : costs["types"]) {
    if (line["market"] != "burst") continue;
    charged = true;
    EXPECT_EQ(line["requests"], pool["queries"]) << cost->body;
    EXPECT_NEAR(line["cost"].get<double>(), pool["queries"].get<double>() * 4.31e-7, 1e-12);
  }
  EXPECT_TRUE(charged) << cost->body;
  // One app used the cluster: all of its cost is that app's.
  ASSERT_EQ(costs["apps"].size(), 1u) << cost->body;
  const json& app = costs["apps"][0];
  std::cerr << "app " << app["app"] << ": share " << app["share"] << ", $" << app["cost"]
            << " of $" << costs["cost"] << ", " << app["requests"] << " charged by the request\n";
  EXPECT_EQ(app["app"], "fashion");
  EXPECT_NEAR(app["share"].get<double>(), 1, 1e-9);
  EXPECT_EQ(app["requests"], pool["queries"]) << cost->body;
  EXPECT_NEAR(app["cost"].get<double>(), costs["cost"].get<double>(), 1e-9) << cost->body;
  // The server serves on.
  auto after =
      server_->Post("/v2/apps/fashion/infer", testing::ImageRequest(*valset_, 0, nullptr));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->status, 200) << after->body;
  EXPECT_TRUE(server_->Stop().ok());
}

// SIGTERM while queries are in flight (held on frozen workers): the server
// refuses new connections, answers every query in flight once the workers
// go on, and exits 0 leaving nothing running.
TEST_F(ResilienceTest, SigtermAnswersEveryQueryInFlight) {
  // The grace is far beyond what the test needs, so that only a lost query,
  // not a slow host, fails it.
  StartServing(kModel, {"--drain-grace", "120"});
  if (HasFatalFailure()) return;
  const std::string path = absl::StrCat("/v2/models/", kModel, "/infer");
  auto first = server_->Post(path, testing::ImageRequest(*valset_, 0, nullptr));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->status, 200) << first->body;  // the model is loaded now
  auto pids = server_->WorkerPids();
  ASSERT_TRUE(pids.ok()) << pids.status();

  constexpr int kInFlight = 8;
  std::vector<std::string> answers(kInFlight);
  std::vector<std::thread> clients;
  Frozen frozen(*pids);
  ASSERT_TRUE(frozen.stopped());
  for (int i = 0; i < kInFlight; ++i) {
    clients.emplace_back([&, i] {
      http::ClientOptions options;
      options.base_url = server_->url();
      options.timeout = 300 * kSecond;
      auto client = http::Client::Create(options);
      if (!client.ok()) return;
      auto r = (*client)->Send("POST", path, testing::ImageRequest(*valset_, i + 1, nullptr),
                               {{"Content-Type", "application/json"}});
      answers[i] = r.ok() ? absl::StrCat(r->status, " ", r->body) : r.status().ToString();
    });
  }
  // Every query has reached a (frozen) worker: in flight when SIGTERM comes.
  int in_flight = 0;
  const bool all_sent = testing::WaitUntil(
      [&] {
        auto index = server_->RepositoryIndex();
        if (!index.ok()) return false;
        in_flight = 0;
        for (const json& m : (*index)["models"]) {
          for (const json& inst : m["instances"]) in_flight += inst["in_flight"].get<int>();
        }
        return in_flight == kInFlight;
      },
      60);
  const bool signalled = all_sent && kill(server_->pid(), SIGTERM) == 0;
  // While the drain waits for them, a new connection is refused.
  auto new_connection_refused = [&] {
    http::ClientOptions options;
    options.base_url = server_->url();
    auto client = http::Client::Create(options);
    return client.ok() && !(*client)->Send("GET", "/v2/health/ready").ok();
  };
  const bool refused = signalled && testing::WaitUntil(new_connection_refused, 60);
  frozen.Thaw();
  for (std::thread& t : clients) t.join();
  ASSERT_TRUE(all_sent) << in_flight << " of " << kInFlight << " in flight";
  ASSERT_TRUE(signalled);
  EXPECT_TRUE(refused) << "new connections were still served while draining";
  int ok = 0;
  for (int i = 0; i < kInFlight; ++i) {
    EXPECT_TRUE(absl::StartsWith(answers[i], "200 ")) << "query " << i << ": " << answers[i];
    ok += absl::StartsWith(answers[i], "200 ") ? 1 : 0;
  }
  std::cerr << kInFlight << " queries in flight at SIGTERM, " << ok << " answered 200\n";
  absl::StatusOr<int> exit = server_->AwaitExit();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << "wait status " << *exit;
  EXPECT_TRUE(absl::StrContains(server_->Log(), "every request received was answered"))
      << server_->Log();
}

}  // namespace
}  // namespace maitre
