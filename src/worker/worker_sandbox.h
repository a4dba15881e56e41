// How a worker confines itself before it runs any model (core/sandbox.h;
// docs/operations.md, "Sandbox"). It may read the system's libraries, read
// and write its own cache directory and the directory of its host-speed
// file, connect to its controller's port, and nothing else; started as
// root, it runs as the sandbox user.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/sandbox.h"

namespace maitre::worker {

struct ConfinedPaths {
  // Where the worker keeps its files from now on. When it switched user
  // these are relative to its working directory (the cache directory):
  // the directories above it may be closed to the unprivileged user, and a
  // relative path does not pass through them.
  std::string cache_dir;
  std::string host_speed_file;
  SandboxReport report;
};

struct WorkerSandboxOptions {
  SandboxMode mode = SandboxMode::kBestEffort;
  std::string user = "nobody";
  std::string cache_dir;        // absolute or relative to the current directory
  std::string host_speed_file;  // "" = none
  std::string controller;       // host:port; the only TCP port it may connect to
};

// Makes the cache directory (and the host-speed file's), hands both to the
// sandbox user, and confines the process. Must run before the process
// starts a second thread: confinement is per thread, so threads started
// earlier would stay free; it refuses when it finds one.
absl::StatusOr<ConfinedPaths> ConfineWorker(const WorkerSandboxOptions& options);

}  // namespace maitre::worker
