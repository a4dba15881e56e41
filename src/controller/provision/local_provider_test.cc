// The local provider's lifecycle events, with a stand-in for `maitre
// worker`: a shell script that ignores its arguments and sleeps, or exits
// at once with a code of its own.
#include "controller/provision/local_provider.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace maitre::controller {
namespace {

class LocalProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("local_provider_test_", ::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }

  std::unique_ptr<LocalProvider> Make(const std::string& binary, int cpus = 2) {
    LocalProvider::Options options;
    options.binary = binary;
    options.controller = "127.0.0.1:1";
    options.log_dir = (dir_ / "logs").string();
    options.cache_dir = (dir_ / "cache").string();
    options.cpus = cpus;
    auto provider = std::make_unique<LocalProvider>(options);
    provider->OnEvent([this](const WorkerEvent& e) {
      absl::MutexLock lock(&mu_);
      events_.push_back(e);
    });
    return provider;
  }

  // Waits for the n-th event (counting from 1); a minute at most, since a
  // fork and exec take milliseconds even on a busy host.
  WorkerEvent Event(size_t n) {
    absl::MutexLock lock(&mu_);
    auto arrived = [&] { return events_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&arrived), absl::Seconds(60));
    EXPECT_GE(events_.size(), n);
    return events_.size() >= n ? events_[n - 1] : WorkerEvent{};
  }

  std::filesystem::path dir_;
  absl::Mutex mu_;
  std::vector<WorkerEvent> events_ ABSL_GUARDED_BY(mu_);
};

TEST_F(LocalProviderTest, AWorkerIsStartedJoinsAndIsRetired) {
  auto provider = Make(Script("sleeper", "exec sleep 60"));
  provider->Start();
  provider->SetDesired({"t", 1, 0, 0}, 1);
  WorkerEvent started = Event(1);
  EXPECT_EQ(started.kind, WorkerEvent::Kind::kStarted);
  EXPECT_EQ(started.type, "t");
  ASSERT_FALSE(started.launch_token.empty());
  EXPECT_EQ(provider->Starting(), (std::map<std::string, int>{{"t", 1}}));

  provider->OnJoin("w7", started.launch_token);
  WorkerEvent ready = Event(2);
  EXPECT_EQ(ready.kind, WorkerEvent::Kind::kReady);
  EXPECT_EQ(ready.worker_id, "w7");
  EXPECT_TRUE(provider->Starting().empty());

  EXPECT_TRUE(provider->Retire("w7"));
  EXPECT_FALSE(provider->Retire("nobody"));
  WorkerEvent retired = Event(3);
  EXPECT_EQ(retired.kind, WorkerEvent::Kind::kRetired);
  EXPECT_EQ(retired.worker_id, "w7");
  EXPECT_EQ(provider->Desired("t"), 0);
  provider->Stop();
}

TEST_F(LocalProviderTest, AWorkerInheritsNoDescriptorAndAnUnguessableToken) {
  // A file this process holds open without O_CLOEXEC (as a listening socket
  // or the registry's database may be) must not be open in the worker.
  const std::string marker = (dir_ / "held-open-marker").string();
  const int fd = ::open(marker.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 3);
  const std::string result = (dir_ / "result").string();
  auto provider = Make(Script(
      "inspector", absl::StrCat("if ls -l /proc/$$/fd | grep -q held-open-marker; then echo leaked > ",
                                result, "; else echo clean > ", result, "; fi; exec sleep 60")));
  provider->Start();
  provider->SetDesired({"t", 1, 0, 0}, 1);
  WorkerEvent started = Event(1);
  // L<n>, a dash and 128 random bits.
  EXPECT_EQ(started.launch_token.size(), std::string("L1-").size() + 32);
  std::string seen;
  for (int i = 0; i < 600 && seen.empty(); ++i) {
    std::ifstream(result) >> seen;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(seen, "clean");
  provider->Stop();
  ::close(fd);
}

TEST_F(LocalProviderTest, AWorkerThatDiesIsReportedLostWithHow) {
  auto provider = Make(Script("crasher", "exit 3"));
  provider->Start();
  provider->SetDesired({"t", 1, 0, 0}, 1);
  EXPECT_EQ(Event(1).kind, WorkerEvent::Kind::kStarted);
  WorkerEvent lost = Event(2);
  EXPECT_EQ(lost.kind, WorkerEvent::Kind::kLost);
  EXPECT_EQ(lost.detail, "exit code 3");
  provider->Stop();
}

// A spot interruption notice: listeners hear it with the stop time, a
// replacement starts at once, and the worker is killed when the lead runs
// out (here at once) and reported lost as interrupted, with no backoff.
TEST_F(LocalProviderTest, AnInterruptedSpotWorkerIsReplacedThenKilled) {
  auto provider = Make(Script("sleeper", "exec sleep 60"));
  provider->Start();
  WorkerType spot{"s", 1, 0, 0};
  spot.market = WorkerType::Market::kSpot;
  provider->SetDesired(spot, 1);
  WorkerEvent started = Event(1);
  ASSERT_EQ(started.kind, WorkerEvent::Kind::kStarted);
  EXPECT_TRUE(absl::IsNotFound(provider->Interrupt("w1", 0)));  // not joined yet
  provider->OnJoin("w1", started.launch_token);
  ASSERT_EQ(Event(2).kind, WorkerEvent::Kind::kReady);

  ASSERT_TRUE(provider->Interrupt("w1", 0).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(provider->Interrupt("w1", 0)));
  WorkerEvent notice = Event(3);
  EXPECT_EQ(notice.kind, WorkerEvent::Kind::kInterrupted);
  EXPECT_EQ(notice.worker_id, "w1");
  EXPECT_EQ(notice.stops_at, notice.at);
  WorkerEvent replacement = Event(4);
  EXPECT_EQ(replacement.kind, WorkerEvent::Kind::kStarted);
  EXPECT_NE(replacement.launch_token, started.launch_token);
  WorkerEvent lost = Event(5);
  EXPECT_EQ(lost.kind, WorkerEvent::Kind::kLost);
  EXPECT_EQ(lost.worker_id, "w1");
  EXPECT_EQ(lost.detail, "spot interruption (killed by signal 9)");
  EXPECT_EQ(provider->Desired("s"), 1);
  EXPECT_EQ(provider->Starting(), (std::map<std::string, int>{{"s", 1}}));
  provider->Stop();
}

// `maitre serve --inject-interruption 0:0`: the notice waits until a spot
// worker has joined, and goes to it, never to the on-demand one.
TEST_F(LocalProviderTest, AnInjectedNoticeGoesToTheOldestSpotWorkerOnce) {
  LocalProvider::Options options;
  options.binary = Script("sleeper", "exec sleep 60");
  options.controller = "127.0.0.1:1";
  options.log_dir = (dir_ / "logs").string();
  options.cache_dir = (dir_ / "cache").string();
  options.cpus = 2;
  options.inject_after = 0;
  options.inject_lead = 0;
  LocalProvider provider(options);
  provider.OnEvent([this](const WorkerEvent& e) {
    absl::MutexLock lock(&mu_);
    events_.push_back(e);
  });
  provider.Start();
  WorkerType spot{"s", 1, 0, 0};
  spot.market = WorkerType::Market::kSpot;
  provider.SetDesired({"t", 1, 0, 0}, 1);  // on demand: never chosen
  provider.SetDesired(spot, 1);
  WorkerEvent first = Event(1), second = Event(2);
  ASSERT_EQ(first.kind, WorkerEvent::Kind::kStarted);
  ASSERT_EQ(second.kind, WorkerEvent::Kind::kStarted);
  provider.OnJoin("on-demand", first.type == "t" ? first.launch_token : second.launch_token);
  provider.OnJoin("spot", first.type == "s" ? first.launch_token : second.launch_token);
  EXPECT_EQ(Event(3).kind, WorkerEvent::Kind::kReady);
  EXPECT_EQ(Event(4).kind, WorkerEvent::Kind::kReady);
  WorkerEvent notice = Event(5);
  EXPECT_EQ(notice.kind, WorkerEvent::Kind::kInterrupted);
  EXPECT_EQ(notice.worker_id, "spot");
  EXPECT_EQ(Event(6).kind, WorkerEvent::Kind::kStarted);  // its replacement
  WorkerEvent lost = Event(7);
  EXPECT_EQ(lost.kind, WorkerEvent::Kind::kLost);
  EXPECT_EQ(lost.worker_id, "spot");
  provider.Stop();
}

TEST_F(LocalProviderTest, AnOnDemandWorkerIsNotInterrupted) {
  auto provider = Make(Script("sleeper", "exec sleep 60"));
  provider->Start();
  provider->SetDesired({"t", 1, 0, 0}, 1);
  provider->OnJoin("w1", Event(1).launch_token);
  ASSERT_EQ(Event(2).kind, WorkerEvent::Kind::kReady);
  absl::Status refused = provider->Interrupt("w1", kSecond);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("on-demand"), std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(provider->Interrupt("nobody", kSecond)));
  provider->Stop();
}

// The default layout (`maitre serve --workers auto`): one of each type when
// the cores fit them all, else the smallest type on every core it fits.
TEST(DefaultLocalWorkersTest, OneOfEachTypeWhenTheCoresFitElseTheSmallestOnEveryCore) {
  const WorkerTypeTable types = WorkerTypeTable::Default();  // cpu-1 (1 core), cpu-2 (2)
  EXPECT_EQ(DefaultLocalWorkers(types, 1), "cpu-1:1");
  EXPECT_EQ(DefaultLocalWorkers(types, 2), "cpu-1:2");
  EXPECT_EQ(DefaultLocalWorkers(types, 3), "cpu-1:1,cpu-2:1");
  EXPECT_EQ(DefaultLocalWorkers(types, 16), "cpu-1:1,cpu-2:1");
  const WorkerTypeTable big({{"c4", 4, 1000, 1}, {"c8", 8, 1000, 2}, {"d4", 4, 1000, 1}});
  EXPECT_EQ(DefaultLocalWorkers(big, 2), "c4:1");  // none fits: one of the smallest
  EXPECT_EQ(DefaultLocalWorkers(big, 9), "c4:2");  // a tie: the first listed
  EXPECT_EQ(DefaultLocalWorkers(big, 16), "c4:1,c8:1,d4:1");
  EXPECT_EQ(DefaultLocalWorkers(WorkerTypeTable(std::vector<WorkerType>{}), 4), "");
}

// Launches `layout` ("type:count,...") on a machine of `cpus` cores with a
// stand-in worker that records its arguments, and returns each worker's
// --cores.
class LocalProviderLayoutTest : public LocalProviderTest {
 public:
  std::vector<std::vector<int>> Cores(const std::string& layout, int cpus) {
    std::filesystem::remove_all(dir_ / "args");
    std::filesystem::create_directories(dir_ / "args");
    auto provider = Make(
        Script("recorder", absl::StrCat("echo \"$@\" > ", (dir_ / "args").string(), "/$$; exec sleep 60")),
        cpus);
    const WorkerTypeTable types = WorkerTypeTable::Default();
    int workers = 0;
    for (absl::string_view item : absl::StrSplit(layout, ',', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(item, ':');
      int count = 0;
      EXPECT_TRUE(f.size() == 2 && absl::SimpleAtoi(f[1], &count)) << item;
      provider->SetDesired(*types.Find(f[0]), count);
      workers += count;
    }
    provider->Start();
    std::vector<std::vector<int>> cores;
    for (int i = 0; i < 600; ++i) {
      cores.clear();
      for (const auto& entry : std::filesystem::directory_iterator(dir_ / "args")) {
        std::string line;
        std::getline(std::ifstream(entry.path()), line);
        std::vector<std::string> args = absl::StrSplit(line, ' ');
        for (size_t a = 0; a + 1 < args.size(); ++a) {
          if (args[a] != "--cores") continue;
          std::vector<int> mine;
          for (absl::string_view c : absl::StrSplit(args[a + 1], ',')) {
            int core = -1;
            EXPECT_TRUE(absl::SimpleAtoi(c, &core)) << line;
            mine.push_back(core);
          }
          cores.push_back(mine);
        }
      }
      if (static_cast<int>(cores.size()) == workers) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    provider->Stop();
    EXPECT_EQ(static_cast<int>(cores.size()), workers) << layout;
    return cores;
  }
};

int SharedCores(const std::vector<std::vector<int>>& workers) {
  int shared = 0;
  for (size_t i = 0; i < workers.size(); ++i) {
    for (size_t j = i + 1; j < workers.size(); ++j) {
      for (int c : workers[i]) {
        shared += std::count(workers[j].begin(), workers[j].end(), c) > 0 ? 1 : 0;
      }
    }
  }
  return shared;
}

// The old embedded default, one cpu-1 and one cpu-2 worker, pinned both to
// core 1 of a 2-core machine, and the autoscalers counted the two as
// independent capacity. The derived default gives every worker cores of
// its own on any machine with the cores for one worker.
TEST_F(LocalProviderLayoutTest, TheDefaultLayoutGivesEveryWorkerItsOwnCores) {
  EXPECT_EQ(SharedCores(Cores("cpu-1:1,cpu-2:1", 2)), 1);
  for (int cpus : {1, 2, 3, 4}) {
    const std::string layout = DefaultLocalWorkers(WorkerTypeTable::Default(), cpus);
    const std::vector<std::vector<int>> cores = Cores(layout, cpus);
    EXPECT_EQ(SharedCores(cores), 0) << layout << " on " << cpus << " cores";
    for (const std::vector<int>& mine : cores) {
      for (int c : mine) {
        EXPECT_GE(c, 0);
        EXPECT_LT(c, cpus);
      }
    }
  }
}

}  // namespace
}  // namespace maitre::controller
