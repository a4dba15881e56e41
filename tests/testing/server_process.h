// Runs a real `maitre serve` for end-to-end tests: its own data directory,
// free loopback ports, the local provider's real worker processes. Stop()
// (or the destructor) shuts it down and checks that nothing it started is
// still running.
//
// Thread-safety: not synchronised; for single-threaded test bodies.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "http/client.h"

namespace maitre::testing {

struct ServerOptions {
  std::string data_dir;                      // required; reused across restarts
  std::string workers = "cpu-1:1,cpu-2:1";   // --workers
  std::string http = "127.0.0.1:0";          // --http
  std::vector<std::string> extra_args;       // e.g. {"--max-body-mb", "8"}
};

class ServerProcess {
 public:
  // Starts the server and waits until it is ready (a worker joined).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const ServerOptions& options);
  ~ServerProcess();

  // SIGTERM, wait, then verify that no process started by this server
  // remains. Returns an error naming any survivor, or saying that the
  // server had ended before the call or did not exit 0 on SIGTERM.
  absl::Status Stop();

  // Waits for a server the test has signalled itself to exit, then checks
  // as Stop() does that nothing it started remains; returns the exit status
  // (as waitpid reports it). Sends nothing: a second SIGTERM would cut a
  // drain short.
  absl::StatusOr<int> AwaitExit();

  const std::string& url() const { return url_; }
  // host:port of the gRPC front-end.
  const std::string& grpc_address() const { return grpc_address_; }
  // host:port where workers join (maitre serve --control).
  const std::string& control_address() const { return control_address_; }
  pid_t pid() const { return pid_; }
  http::Client& client() { return *client_; }

  // The admin key of a server that requires keys (from its
  // <data-dir>/admin-key); "" for one that does not. The helpers below
  // present it.
  const std::string& admin_key() const { return admin_key_; }
  // One request presenting `api_key` ("" presents none).
  absl::StatusOr<http::Response> SendAs(const std::string& api_key, const std::string& method,
                                        const std::string& path, std::string body = "",
                                        const std::string& content_type = "application/json");

  // Convenience wrappers; non-2xx is not an error.
  absl::StatusOr<http::Response> Get(const std::string& path);
  absl::StatusOr<http::Response> Post(const std::string& path, std::string body,
                                      const std::string& content_type = "application/json");
  // The body of a 2xx JSON response, or an error with the status and body.
  absl::StatusOr<nlohmann::json> GetJson(const std::string& path);
  // POST /v2/repository/index.
  absl::StatusOr<nlohmann::json> RepositoryIndex();

  // Registers a zoo model under `app` with a validation set file.
  absl::StatusOr<http::Response> Register(const std::string& app, const std::string& name,
                                          const std::string& model_path,
                                          const std::string& onnx_path,
                                          const std::string& valset_path);

  // Waits until every variant of `app` is generated and measured, and its
  // profile is final on every worker type this server was started with;
  // fails only when that work stops moving (testing/wait.h).
  absl::Status AwaitProfiles(const std::string& app);

  // The server's log so far (its stderr and stdout), for failure messages.
  std::string Log() const;

  // Pids of this server's worker processes: the workers the repository
  // index lists, their pids from the operator's log (clients are not shown
  // them).
  absl::StatusOr<std::vector<pid_t>> WorkerPids();
  // The pid the worker `worker_id` joined with, from the log.
  absl::StatusOr<pid_t> WorkerPid(const std::string& worker_id) const;

 private:
  ServerProcess() = default;
  // After the server exited: that no process it started remains.
  absl::Status CheckNothingLeft();

  ServerOptions options_;
  pid_t pid_ = 0;
  std::string url_;
  std::string grpc_address_;
  std::string control_address_;
  std::unique_ptr<http::Client> client_;
  std::string admin_key_;
};

// The path of the maitre binary under test (MAITRE_BINARY, set by ctest).
std::string MaitreBinary();

// Pids of live processes whose command line mentions `needle`.
std::vector<pid_t> ProcessesMentioning(const std::string& needle);

// Whether every thread of `pid` has stopped (state 't' or 'T'). kill(SIGSTOP)
// returns before a multi-threaded process has stopped: a thread running on
// another core finishes what it is doing first.
bool AllThreadsStopped(pid_t pid);

}  // namespace maitre::testing
