// Confinement for the processes that run uploaded model code: workers (the
// model's forward pass) and the variant generators' Python children (which
// load and trace the model). A TorchScript model can call file operations
// such as `torch.from_file`, so whatever runs one is treated as hostile:
//   - Landlock limits which files it may read, write or execute, which TCP
//     ports it may connect to, and keeps it from signalling processes
//     outside its own domain (each only as far as the kernel's Landlock
//     version allows; docs/operations.md, "Sandbox");
//   - no_new_privs keeps it from gaining rights through setuid programs;
//   - started as root, it switches to an unprivileged user, which also
//     clears every capability.
//
// Confinement is per thread and inherited by everything the thread starts:
// a process confines itself by calling ConfineCallingThread before it
// starts any other thread; a multi-threaded one confines a short-lived
// thread of its own and starts the child from there. The user switch uses
// raw system calls, which change only the calling thread's credentials.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace maitre {

enum class SandboxMode {
  kOff,         // run unconfined
  kBestEffort,  // confine as far as this kernel allows; say what is missing
  kRequired,    // refuse to run without Landlock
};

absl::StatusOr<SandboxMode> ParseSandboxMode(const std::string& text);
const char* SandboxModeName(SandboxMode mode);

struct SandboxOptions {
  SandboxMode mode = SandboxMode::kBestEffort;
  // Directories (and everything beneath them) or single files that may be
  // read; a path that does not exist is skipped.
  std::vector<std::string> read_paths;
  // Directories that may be read, written, and have entries made and removed.
  std::vector<std::string> write_paths;
  // Directories or files that may be executed (execve). Shared libraries are
  // mapped, not executed: a worker needs none here.
  std::vector<std::string> exec_paths;
  // TCP ports it may connect to; every other TCP connect is refused.
  std::vector<int> connect_ports;
  // Switched to when the thread runs as root ("" stays root, which keeps
  // root's file ownership but the Landlock rules still apply).
  std::string user = "nobody";
};

// The read-only paths a process that only maps system libraries needs:
// /usr, /lib*, the dynamic linker's cache, /dev/null and /dev/urandom, and
// the CPU topology the math libraries read.
std::vector<std::string> SystemReadPaths();

// What ConfineCallingThread applied, for the log.
struct SandboxReport {
  int landlock_abi = 0;  // 0: Landlock unavailable, or mode kOff
  bool network_rules = false;
  bool signal_scope = false;
  std::string user;  // the user switched to; "" when unchanged
  std::string Describe() const;
};

// The Landlock ABI version this kernel offers (0 when none).
int LandlockAbi();

// Confines the calling thread and everything it later starts. Irreversible.
// Fails (kRequired) when Landlock is unavailable, and always when a rule
// cannot be added or the user cannot be switched to.
absl::StatusOr<SandboxReport> ConfineCallingThread(const SandboxOptions& options);

// Hands `dir` and everything beneath it to `user`, so that a process that
// will switch to that user may keep working there. For root only.
absl::Status HandTreeTo(const std::string& dir, const std::string& user);

// The number of threads in this process (from /proc/self/task).
int ThreadsInProcess();

}  // namespace maitre
