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

#include "absl/strings/str_cat.h"
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

  std::unique_ptr<LocalProvider> Make(const std::string& binary) {
    LocalProvider::Options options;
    options.binary = binary;
    options.controller = "127.0.0.1:1";
    options.log_dir = (dir_ / "logs").string();
    options.cache_dir = (dir_ / "cache").string();
    options.cpus = 2;
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

}  // namespace
}  // namespace maitre::controller
