// `maitre job`: offline jobs from the command line (docs/api.md, "Offline
// jobs").
//   maitre job submit --app A --input PATH --output DIR [--model M] [--latency-ms L]
//                     [--min-accuracy X] [--max-cost C] [--batch-size N] [--wait] [--json]
//   maitre job status ID [--json]
//   maitre job list [--json]
//   maitre job cancel ID
// Paths are on the controller's filesystem; relative ones are made absolute
// here, which is right when the controller runs on this machine. Every
// subcommand takes --server URL.
//
// Thread-safety: the Run* functions use no shared state.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace maitre::cli {

struct JobSubmitArgs {
  std::string server;
  std::string app;
  std::string input;
  std::string output;
  std::string model;
  double latency_ms = -1;  // <= 0: none
  double min_accuracy = -1;
  double max_cost = -1;
  int batch_size = 0;  // 0: the server's default
  bool wait = false;   // follow the job until it ends; exit 0 only if it succeeded
  bool json = false;
};

struct JobQueryArgs {
  std::string server;
  std::string id;  // status, cancel
  bool json = false;
};

int RunJobSubmit(const JobSubmitArgs& args);
int RunJobStatus(const JobQueryArgs& args);
int RunJobList(const JobQueryArgs& args);
int RunJobCancel(const JobQueryArgs& args);

// Adds `job` and its subcommands to `app`; each sets *exit_code when it runs.
// `default_server` is the --server default.
void AddJobCommands(CLI::App& app, int* exit_code,
                    const std::string& default_server = "http://127.0.0.1:8000");

}  // namespace maitre::cli
