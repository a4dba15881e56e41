// The `maitre worker` process: serves maitre.worker.v1.Worker, registers with
// its controller, reports every interval, and runs until SIGTERM/SIGINT.
#pragma once

#include <string>
#include <vector>

namespace maitre::worker {

struct WorkerOptions {
  std::string controller = "127.0.0.1:8002";  // maitre serve --control
  std::string type = "cpu-1";
  // Where to listen; port 0 picks a free one. The address registered with
  // the controller uses `advertise_host` when set, else the listen host.
  std::string listen = "127.0.0.1:0";
  std::string advertise_host;
  std::vector<int> cores;  // CPUs to pin to; empty = no pinning
  std::string cache_dir;   // empty = a fresh directory under /tmp
  // The fastest host-speed reading seen by this type's workers on this host
  // (runtime/host_speed.h); empty = this process's own only.
  std::string host_speed_file;
  // Set by the controller's local provider (also from $MAITRE_LAUNCH_TOKEN).
  std::string launch_token;
  // The cluster's join token (docs/operations.md, "Security"): read from
  // this file, else from $MAITRE_JOIN_TOKEN.
  std::string join_token_file;
  // How model code is confined (core/sandbox.h): "off", "best-effort" or
  // "required"; started as root, the worker runs as `sandbox_user`.
  std::string sandbox = "best-effort";
  std::string sandbox_user = "nobody";
};

// Returns the process exit code.
int RunWorker(const WorkerOptions& options);

}  // namespace maitre::worker
