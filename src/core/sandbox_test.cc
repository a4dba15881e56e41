#include "core/sandbox.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/file_util.h"

namespace maitre {
namespace {

// A fresh directory anyone may use, so that only Landlock, not file
// permissions, stands between the confined thread and it.
class OpenTempDir {
 public:
  OpenTempDir() {
    std::string pattern = std::filesystem::temp_directory_path().string() + "/sandbox-test-XXXXXX";
    path_ = mkdtemp(pattern.data());
    chmod(path_.c_str(), 0777);
  }
  ~OpenTempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Confinement sticks to the thread that asked for it, so each case runs on
// a thread of its own and the test process stays free.
void OnConfinedThread(const SandboxOptions& options, const std::function<void()>& body) {
  std::thread t([&] {
    auto report = ConfineCallingThread(options);
    ASSERT_TRUE(report.ok()) << report.status();
    body();
  });
  t.join();
}

// errno after trying to open `path` with `flags` (0 when it opened).
int OpenErrno(const std::string& path, int flags) {
  int fd = open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (LandlockAbi() == 0) GTEST_SKIP() << "this kernel has no Landlock";
    ASSERT_TRUE(WriteFileAtomically(inside_.path() + "/model.pt", "weights").ok());
    ASSERT_TRUE(WriteFileAtomically(outside_.path() + "/secret", "host data").ok());
    chmod((outside_.path() + "/secret").c_str(), 0666);
  }
  SandboxOptions Options() const {
    SandboxOptions options;
    options.mode = SandboxMode::kRequired;
    options.read_paths = SystemReadPaths();
    options.write_paths = {inside_.path()};
    return options;
  }
  OpenTempDir inside_, outside_;
};

TEST_F(SandboxTest, FilesOutsideTheAllowedPathsCanBeNeitherReadNorWritten) {
  OnConfinedThread(Options(), [&] {
    EXPECT_EQ(OpenErrno(inside_.path() + "/model.pt", O_RDONLY), 0);
    EXPECT_EQ(OpenErrno(inside_.path() + "/new", O_WRONLY | O_CREAT), 0);
    EXPECT_EQ(OpenErrno(outside_.path() + "/secret", O_RDONLY), EACCES);
    EXPECT_EQ(OpenErrno(outside_.path() + "/secret", O_WRONLY | O_TRUNC), EACCES);
    EXPECT_EQ(OpenErrno(outside_.path() + "/planted", O_WRONLY | O_CREAT), EACCES);
    EXPECT_EQ(OpenErrno("/etc/passwd", O_RDONLY), EACCES);
    EXPECT_EQ(OpenErrno("/proc/self/environ", O_RDONLY), EACCES);
    // Read-only system paths stay read-only.
    EXPECT_EQ(OpenErrno("/usr/lib/os-release", O_RDONLY), 0);
    EXPECT_NE(OpenErrno("/usr/lib/os-release", O_WRONLY), 0);
  });
  std::ifstream planted(outside_.path() + "/planted");
  EXPECT_FALSE(planted.good());
}

TEST_F(SandboxTest, NothingCanBeExecutedUnlessAllowed) {
  auto spawn_true = [] {
    pid_t pid = -1;
    char arg0[] = "/bin/true";
    char* argv[] = {arg0, nullptr};
    int rc = posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, nullptr);
    if (rc == 0) waitpid(pid, nullptr, 0);
    return rc;
  };
  OnConfinedThread(Options(), [&] { EXPECT_EQ(spawn_true(), EACCES); });
  SandboxOptions options = Options();
  // The dynamic loader is executed too, so the libraries count.
  options.exec_paths = {"/usr"};
  OnConfinedThread(options, [&] { EXPECT_EQ(spawn_true(), 0); });
}

// A loopback listener on an ephemeral port.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd_, 4);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

int ConnectErrno(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = rc == 0 ? 0 : errno;
  close(fd);
  return err;
}

TEST_F(SandboxTest, TcpConnectsOnlyToTheAllowedPorts) {
  if (LandlockAbi() < 4) GTEST_SKIP() << "Landlock network rules need ABI 4";
  Listener controller, other;
  SandboxOptions options = Options();
  options.connect_ports = {controller.port()};
  OnConfinedThread(options, [&] {
    EXPECT_EQ(ConnectErrno(controller.port()), 0);
    EXPECT_EQ(ConnectErrno(other.port()), EACCES);
  });
}

TEST_F(SandboxTest, SignalsCannotReachProcessesOutside) {
  if (LandlockAbi() < 6) GTEST_SKIP() << "Landlock signal scoping needs ABI 6";
  pid_t bystander = fork();
  if (bystander == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(bystander, 0);
  OnConfinedThread(Options(), [&] { EXPECT_NE(kill(bystander, SIGTERM), 0); });
  EXPECT_EQ(kill(bystander, SIGKILL), 0);
  waitpid(bystander, nullptr, 0);
}

TEST_F(SandboxTest, RootSwitchesToTheUnprivilegedUserAndLosesItsCapabilities) {
  if (geteuid() != 0) GTEST_SKIP() << "only root switches user";
  OnConfinedThread(Options(), [&] {
    EXPECT_NE(geteuid(), 0u);
    EXPECT_EQ(syscall(SYS_setresuid, 0, 0, 0), -1);  // no way back
  });
  EXPECT_EQ(geteuid(), 0u);  // only the confined thread changed
}

TEST(SandboxModeTest, ParsesItsThreeModes) {
  EXPECT_EQ(*ParseSandboxMode("off"), SandboxMode::kOff);
  EXPECT_EQ(*ParseSandboxMode("best-effort"), SandboxMode::kBestEffort);
  EXPECT_EQ(*ParseSandboxMode("required"), SandboxMode::kRequired);
  EXPECT_FALSE(ParseSandboxMode("yes").ok());
  for (SandboxMode m : {SandboxMode::kOff, SandboxMode::kBestEffort, SandboxMode::kRequired}) {
    EXPECT_EQ(*ParseSandboxMode(SandboxModeName(m)), m);
  }
}

TEST(SandboxModeTest, OffConfinesNothing) {
  SandboxOptions options;
  options.mode = SandboxMode::kOff;
  std::thread t([&] {
    auto report = ConfineCallingThread(options);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->Describe(), "unconfined");
    EXPECT_EQ(OpenErrno("/proc/self/status", O_RDONLY), 0);
  });
  t.join();
}

}  // namespace
}  // namespace maitre
