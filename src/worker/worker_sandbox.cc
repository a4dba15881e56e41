#include "worker/worker_sandbox.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "runtime/process_stats.h"

namespace maitre::worker {
namespace {

namespace fs = std::filesystem;

// The port of "host:port" (the only one a confined worker may connect to).
absl::StatusOr<int> PortOf(const std::string& address) {
  int port = 0;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("sandbox: the controller address '", address, "' has no port"));
  }
  return port;
}

}  // namespace

absl::StatusOr<ConfinedPaths> ConfineWorker(const WorkerSandboxOptions& options) {
  ConfinedPaths paths;
  paths.cache_dir = options.cache_dir;
  paths.host_speed_file = options.host_speed_file;
  if (absl::Status s = MakeDirectories(options.cache_dir); !s.ok()) return s;
  if (options.mode == SandboxMode::kOff) return paths;
  const int threads = ThreadsInProcess();
  if (threads != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox: the worker has ", threads, " threads before confining itself; it needs one"));
  }
  auto port = PortOf(options.controller);
  if (!port.ok()) return port.status();

  const std::string cache_dir = fs::absolute(options.cache_dir).lexically_normal().string();
  std::string host_speed_dir;
  if (!options.host_speed_file.empty()) {
    host_speed_dir = fs::absolute(options.host_speed_file).parent_path().string();
    if (absl::Status s = MakeDirectories(host_speed_dir); !s.ok()) return s;
  }
  const bool switches_user = geteuid() == 0 && !options.user.empty();
  if (switches_user) {
    if (absl::Status s = HandTreeTo(cache_dir, options.user); !s.ok()) return s;
    if (!host_speed_dir.empty()) {
      if (absl::Status s = HandTreeTo(host_speed_dir, options.user); !s.ok()) return s;
    }
    if (chdir(cache_dir.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("sandbox: chdir ", cache_dir, ": ",
                                              std::strerror(errno)));
    }
    paths.cache_dir = ".";
    if (!options.host_speed_file.empty()) {
      paths.host_speed_file =
          fs::absolute(options.host_speed_file).lexically_relative(cache_dir).string();
    }
  }

  // The memory readings keep their /proc descriptors open from here on.
  runtime::ResidentMemoryMb();
  runtime::PeakResidentMemoryMb();

  // Switching user clears the parent-death signal the local provider set,
  // which a worker must keep so that it never outlives its controller.
  int parent_death_signal = 0;
  prctl(PR_GET_PDEATHSIG, &parent_death_signal);
  const pid_t parent = getppid();

  SandboxOptions sandbox;
  sandbox.mode = options.mode;
  sandbox.user = options.user;
  sandbox.read_paths = SystemReadPaths();
  // Name resolution, for a controller given by host name.
  for (const char* f : {"/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/host.conf",
                        "/etc/gai.conf"}) {
    sandbox.read_paths.push_back(f);
  }
  sandbox.write_paths = {cache_dir};
  if (!host_speed_dir.empty()) sandbox.write_paths.push_back(host_speed_dir);
  sandbox.connect_ports = {*port};
  auto report = ConfineCallingThread(sandbox);
  if (!report.ok()) return report.status();
  if (parent_death_signal != 0) {
    prctl(PR_SET_PDEATHSIG, parent_death_signal);
    if (getppid() != parent) {
      return absl::AbortedError("sandbox: the controller ended while this worker started");
    }
  }
  paths.report = *report;
  return paths;
}

}  // namespace maitre::worker
