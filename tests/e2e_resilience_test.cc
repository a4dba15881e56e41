// End-to-end: no request the server accepted is lost (docs/architecture.md,
// "When a worker is lost" and "Shutting down"). A worker killed with SIGKILL
// under 200 queries/s costs no query: each it held is sent again to another
// instance. SIGTERM answers every query in flight before the server exits 0,
// refusing new connections meanwhile.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
  // A server with the default workers (one cpu-1, one cpu-2) and `model`
  // registered.
  void StartServing(const std::string& model, std::vector<std::string> extra_args) {
    auto zoo = runtime::testing::LoadZoo();
    ASSERT_TRUE(zoo.ok()) << zoo.status();
    valset_ = *runtime::testing::ZooValset();
    const std::string valset_path = dir_.path() + "/valset.npz";
    ASSERT_TRUE(testing::WriteValsetSlice(*valset_, 300, valset_path).ok());
    ServerOptions options;
    options.data_dir = dir_.path() + "/data";
    options.extra_args = std::move(extra_args);
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

  loadgen::BenchOptions bench;
  bench.server = server_->url();
  bench.model = kSlowLoadingModel;
  bench.rate_qps = 200;
  bench.duration_s = 20;
  std::atomic<int64_t> answered{0};
  std::atomic<bool> loading{true};
  bench.progress = [&](const loadgen::Progress& p) { answered = p.answered; };
  absl::StatusOr<loadgen::BenchReport> report;
  std::thread load([&] {
    report = loadgen::RunBench(bench);
    loading = false;
  });
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
  load.join();
  ASSERT_TRUE(killed_loader) << "no worker was seen loading " << kSlowLoadingModel << "\n"
                             << server_->Log();
  ASSERT_TRUE(killed_server) << "no worker was seen serving " << kSlowLoadingModel
                             << " while the load went on\n"
                             << server_->Log();
  ASSERT_TRUE(report.ok()) << report.status();
  std::cerr << "killed " << loader.first << " (pid " << loader.second << ") while it loaded the "
            << "model, then " << server.first << " (pid " << server.second << ") while it served "
            << "it; " << report->ok << " of " << report->started << " queries answered, "
            << report->failed << " failed, " << report->unfinished << " unfinished, p99 "
            << report->latency_ms.p99 << " ms\n";
  for (const loadgen::ErrorCount& e : report->errors) {
    ADD_FAILURE() << e.count << " x " << e.kind << ": " << e.example;
  }
  EXPECT_EQ(report->failed, 0) << server_->Log();
  EXPECT_EQ(report->unfinished, 0);
  EXPECT_EQ(report->ok, report->started);
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
