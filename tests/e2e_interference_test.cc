// End-to-end: interference migration (docs/policies.md, "Interference
// migration") on a real `maitre serve` with two one-core workers. Online
// load keeps one instance busy; processes that spin on that worker's core
// then slow it down until the state machine calls it Interfered (the server
// and the test's clients move onto that core with them, so that the other
// worker's core is free); the model must end up served on the other worker,
// the slow copy unloaded, and not one query fail on the way.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/testing/zoo.h"
#include "testing/online_load.h"
#include "testing/server_process.h"
#include "testing/wait.h"
#include "testing/zoo_requests.h"

namespace maitre {
namespace {

using nlohmann::json;
using runtime::testing::ScopedTempDir;
using testing::OnlineLoad;
using testing::ServerOptions;
using testing::ServerProcess;

constexpr char kVariant[] = "fmnist-cnn-wide:torch";

// Child processes that spin on the cores of another process, for as long as
// this object lives: a co-located tenant that takes CPU the instance's
// profile assumed it had.
class CoreHogs {
 public:
  CoreHogs(pid_t neighbour, int per_core) {
    cpu_set_t cores;
    CPU_ZERO(&cores);
    if (sched_getaffinity(neighbour, sizeof cores, &cores) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &cores)) continue;
      cores_.push_back(c);
      for (int k = 0; k < per_core; ++k) {
        const pid_t pid = fork();
        if (pid == 0) {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(c, &one);
          sched_setaffinity(0, sizeof one, &one);
          volatile uint64_t spin = 0;
          for (;;) spin = spin + 1;
        }
        if (pid > 0) pids_.push_back(pid);
      }
    }
  }
  ~CoreHogs() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  const std::vector<int>& cores() const { return cores_; }
  size_t count() const { return pids_.size(); }

 private:
  std::vector<int> cores_;
  std::vector<pid_t> pids_;
};

// Moves every thread of `pid` onto `cores`; threads they start later
// inherit it. Returns how many threads moved.
int PinThreads(pid_t pid, const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  int moved = 0;
  std::error_code error;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), error)) {
    const pid_t tid = static_cast<pid_t>(std::stol(task.path().filename().string()));
    if (sched_setaffinity(tid, sizeof set, &set) == 0) ++moved;
  }
  return moved;
}

// The workers holding a ready instance of `variant`, from the repository
// index; with the figures of each, for failure messages.
std::set<std::string> WorkersServing(const json& index, const std::string& variant,
                                     std::string* trace) {
  std::set<std::string> workers;
  for (const json& m : index["models"]) {
    if (absl::StrCat(m["name"].get<std::string>(), ":", m["version"].get<std::string>()) !=
        variant) {
      continue;
    }
    for (const json& inst : m["instances"]) {
      absl::StrAppend(trace, " ", inst["worker"].get<std::string>(), ":",
                      inst["phase"].get<std::string>(), ":", inst["state"].get<std::string>(),
                      ":", inst["served_qps"].get<double>());
      if (inst["phase"] == "ready") workers.insert(inst["worker"].get<std::string>());
    }
  }
  return workers;
}

double MigrationActions(ServerProcess& server) {
  auto scrape = server.Get("/metrics");
  if (!scrape.ok()) return 0;
  double total = 0;
  for (const char* kind : {"migrate", "migrate-retire"}) {
    const std::string prefix =
        absl::StrCat("maitre_autoscaler_actions_total{action=\"", kind, "\"} ");
    const size_t at = scrape->body.find(prefix);
    if (at != std::string::npos) total += std::stod(scrape->body.substr(at + prefix.size()));
  }
  return total;
}

TEST(InterferenceTest, AnInterferedInstanceMovesToTheOtherWorkerWithoutAFailedQuery) {
  ScopedTempDir dir;
  auto zoo = runtime::testing::LoadZoo();
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  const Valset* valset = *runtime::testing::ZooValset();
  const std::string valset_path = dir.path() + "/valset.npz";
  ASSERT_TRUE(testing::WriteValsetSlice(*valset, 300, valset_path).ok());

  ServerOptions options;
  options.data_dir = dir.path() + "/data";
  options.workers = "cpu-1:2";
  // Only migration moves instances: no replicas added, no workers started.
  options.extra_args = {"--cluster-autoscaler", "false", "--model-autoscaler", "off",
                        "--profile-sweeps", "1"};
  auto started = ServerProcess::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<ServerProcess> server = *std::move(started);
  for (const auto& m : *zoo) {
    if (m.name != "fmnist-cnn-wide") continue;
    auto r = server->Register("fashion", m.name, m.torchscript, m.onnx, valset_path);
    ASSERT_TRUE(r.ok() && r->status / 100 == 2) << (r.ok() ? r->body : r.status().ToString());
  }
  absl::Status profiled = server->AwaitProfiles("fashion");
  ASSERT_TRUE(profiled.ok()) << profiled << "\n" << server->Log();

  // Paced, not back to back: under a closed loop the healthy copy is
  // always at its CPU limit, its capacity is taken as what it serves, and
  // the retire never finds it room for the slow copy's share ("spare 0 qps
  // at 80%" in the held lines of a CI run that held for 12 minutes), rightly:
  // retiring there would cut the capacity of a saturated model. At about
  // 1,000 rows/s the other worker has room, which is the case the
  // migration is for.
  OnlineLoad load(server->url(), kVariant, *valset, /*threads=*/4, /*rows=*/16,
                  absl::Milliseconds(50));
  std::string first;
  std::string trace;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto index = server->RepositoryIndex();
        if (!index.ok()) return false;
        trace.clear();
        std::set<std::string> serving = WorkersServing(*index, kVariant, &trace);
        if (serving.size() != 1 || load.served() < 20) return false;
        first = *serving.begin();
        return true;
      },
      300))
      << trace << "\n" << server->Log();
  ASSERT_EQ(load.failed(), 0) << load.first_failure();

  absl::StatusOr<pid_t> first_pid = server->WorkerPid(first);
  ASSERT_TRUE(first_pid.ok()) << first_pid.status();
  CoreHogs hogs(*first_pid, /*per_core=*/2);
  ASSERT_GT(hogs.count(), 0u);
  // The server and this test's clients move onto the hogged cores too. Left
  // free, on the 2-core host they share the other worker's core, which then
  // reads as Interfered (and at its CPU limit) as often as the hogged one:
  // neither a retire nor a move has a healthy copy to go to, and the
  // migration rightly holds. Moved, the other worker is the healthy one the
  // migration is for.
  ASSERT_GT(PinThreads(server->pid(), hogs.cores()), 0);
  ASSERT_GT(PinThreads(getpid(), hogs.cores()), 0);
  std::cerr << "instance on " << first << ", spinning " << hogs.count() << " processes on core "
            << hogs.cores()[0] << "\n";

  // The model moves: served elsewhere, the slow copy gone. How long the
  // allocator holds first varies: the slow copy's state flips between
  // Interfered and Active every second or two, and the retire waits for a
  // round that finds it Interfered with its spell long enough and the
  // other copy's figures showing room (81 s, 190 s and over 300 s in three
  // runs on the 2-core host on 2026-11-27). So the wait is on progress,
  // with a limit far beyond those.
  std::set<std::string> serving;
  testing::ProgressWaitOptions patient;
  patient.at_most_s = 1200;
  const absl::Status moved = testing::WaitOnProgress(
      [&] {
        auto now = server->RepositoryIndex();
        if (!now.ok()) return testing::Progress{false, now.status().ToString()};
        trace.clear();
        serving = WorkersServing(*now, kVariant, &trace);
        return testing::Progress{
            serving.size() == 1 && serving.count(first) == 0 && MigrationActions(*server) >= 1,
            trace};
      },
      patient);
  ASSERT_TRUE(moved.ok()) << moved << "\nstill on:" << trace << "\n" << server->Log();
  // Queries keep being served after the move, first by the worker the model
  // moved to. Later the whole host may look slow, so selection may load
  // another copy anywhere; only the answers right after the move are its.
  const std::string moved_to = *serving.begin();
  const int64_t served_at_move = load.served();
  const int64_t moved_to_at_move = load.served_by(moved_to);
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return load.served() > served_at_move + 50 && load.served_by(moved_to) > moved_to_at_move;
      },
      300));
  load.Stop();
  std::cerr << "served " << load.served() << " (" << load.served_by(moved_to) << " by "
            << moved_to << "), failed " << load.failed() << "\n";
  for (absl::string_view line : absl::StrSplit(server->Log(), '\n')) {
    if (absl::StrContains(line, "migrat") || absl::StrContains(line, "interfered")) {
      std::cerr << line << "\n";
    }
  }
  EXPECT_EQ(load.failed(), 0) << load.first_failure();
  EXPECT_TRUE(server->Stop().ok());
}

}  // namespace
}  // namespace maitre
