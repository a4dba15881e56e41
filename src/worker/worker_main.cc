#include "worker/worker_main.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/cores.h"
#include "core/sandbox.h"
#include "core/secret_token.h"
#include "core/stop_signal.h"
#include "core/work_queue.h"
#include "runtime/executor.h"
#include "runtime/process_stats.h"
#include "core/logging.h"
#include "worker/controller_link.h"
#include "worker/instance_manager.h"
#include "worker/worker_sandbox.h"
#include "worker/worker_service.h"

namespace maitre::worker {
namespace {

// SIGTERM and SIGINT are taken synchronously on one thread, so shutdown runs
// as ordinary code rather than inside a handler.
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);  // threads created later inherit it
    thread_ = std::thread([this] {
      int sig = 0;
      sigwait(&set_, &sig);
      if (stop_.Request()) spdlog::info("worker: signal {}, shutting down", sig);
    });
  }
  ~SignalWatcher() {
    // Wake the waiting thread if no signal came (an early error return).
    if (stop_.Request()) kill(getpid(), SIGTERM);
    thread_.join();
  }
  const StopSignal* stop() const { return &stop_; }

 private:
  sigset_t set_;
  StopSignal stop_;
  std::thread thread_;
};

// Takes a secret from the environment and overwrites it there: the
// environment stays readable in /proc/<pid>/environ for the process's life.
std::string TakeSecretFromEnvironment(const char* name) {
  char* value = getenv(name);
  if (value == nullptr) return "";
  std::string secret(value);
  std::fill(value, value + secret.size(), 'x');
  unsetenv(name);
  return secret;
}

struct Secrets {
  std::string launch_token;
  std::string join_token;
};

// The tokens this worker joins with: from the flags, else from the
// environment the local provider started it with.
absl::StatusOr<Secrets> TakeSecrets(const WorkerOptions& options) {
  Secrets secrets;
  secrets.launch_token = TakeSecretFromEnvironment("MAITRE_LAUNCH_TOKEN");
  if (!options.launch_token.empty()) secrets.launch_token = options.launch_token;
  secrets.join_token = TakeSecretFromEnvironment("MAITRE_JOIN_TOKEN");
  if (!options.join_token_file.empty()) {
    absl::StatusOr<std::string> from_file = ReadTokenFile(options.join_token_file);
    if (!from_file.ok()) return from_file.status();
    secrets.join_token = *from_file;
  }
  if (secrets.join_token.empty()) {
    return absl::FailedPreconditionError(
        "no join token (--join-token-file or $MAITRE_JOIN_TOKEN); the controller keeps it "
        "in its data directory, file join-token");
  }
  return secrets;
}

std::string HostOf(const std::string& address) {
  return address.substr(0, address.rfind(':'));
}

}  // namespace

int RunWorker(const WorkerOptions& options) {
  // OpenBLAS threads fight torch's own; the worker's parallelism is torch's.
  setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/0);
  absl::StatusOr<Secrets> secrets = TakeSecrets(options);
  if (!secrets.ok()) {
    spdlog::error("worker: {}", secrets.status().message());
    return 1;
  }
  if (absl::Status s = PinCallingThread(options.cores); !s.ok()) {
    spdlog::warn("worker: {}", s.message());
  }
  std::string cache_dir = options.cache_dir;
  if (cache_dir.empty()) {
    cache_dir = absl::StrCat(std::filesystem::temp_directory_path().string(), "/maitre-worker-",
                             getpid());
  }
  // Confined before its first thread, so that every thread it ever runs a
  // model on is confined too.
  absl::StatusOr<SandboxMode> mode = ParseSandboxMode(options.sandbox);
  if (!mode.ok()) {
    spdlog::error("worker: {}", mode.status().message());
    return 2;
  }
  absl::StatusOr<ConfinedPaths> confined = ConfineWorker(
      {*mode, options.sandbox_user, cache_dir, options.host_speed_file, options.controller});
  if (!confined.ok()) {
    spdlog::error("worker: {}", confined.status().message());
    return 1;
  }
  SignalWatcher signals;
  const Clock* clock = SteadyClock::Get();

  const std::string call_token = RandomToken();
  ControllerLink link(
      {options.controller, options.type, secrets->launch_token, secrets->join_token, call_token,
       clock});
  InstanceManager::Options manager_options;
  manager_options.cache_dir = confined->cache_dir;
  manager_options.host_speed_file = confined->host_speed_file;
  manager_options.blobs = &link;
  manager_options.clock = clock;
  InstanceManager manager(manager_options);
  WorkQueue serving(/*threads=*/1);
  WorkQueue background(/*threads=*/1);
  WorkerService service(&manager, clock, &serving, &background, call_token);

  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  service.AddTo(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    spdlog::error("worker: cannot listen on {}", options.listen);
    return 1;
  }
  service.Start();
  std::string host =
      options.advertise_host.empty() ? HostOf(options.listen) : options.advertise_host;
  std::string address = absl::StrCat(host, ":", port);

  auto registration = link.Register(address, 60 * kSecond, signals.stop());
  if (!registration.ok()) {
    spdlog::error("worker: {}", registration.status().message());
    server->Shutdown();
    return 1;
  }
  // Before any model runs: torch's thread count can only be set once work
  // has not started, and the type decides it.
  if (!options.cores.empty()) {
    registration->cores = std::min<int>(registration->cores, options.cores.size());
  }
  runtime::ConfigureProcessThreads(registration->cores);
  if (!registration->batching_policy.empty()) {
    manager.SetBatchingPolicy(registration->batching_policy);
  }
  spdlog::info("worker {} ({}, {} core(s)) serving on {}; model code: {}",
               registration->worker_id, options.type, registration->cores, address,
               confined->report.Describe());

  // Report until told to stop. CPU utilisation is this process's CPU time
  // over the interval, less what profiling and evaluation took, as a
  // fraction of the type's cores.
  auto serving_cpu = [&service] {
    return runtime::ProcessCpuSeconds() - service.RegistrationCpuSeconds();
  };
  double cpu_before = serving_cpu();
  Nanos last = clock->Now();
  while (!clock->SleepUntil(last + registration->report_interval, signals.stop())) {
    Nanos now = clock->Now();
    double cpu_now = serving_cpu();
    double utilisation = std::max(0.0, cpu_now - cpu_before) /
                         std::max(1e-9, ToSeconds(now - last)) / registration->cores;
    cpu_before = cpu_now;
    last = now;
    absl::Status status =
        link.Report(manager, std::min(1.0, utilisation), runtime::ResidentMemoryMb());
    if (absl::IsNotFound(status)) {
      spdlog::warn("worker: the controller forgot this worker; registering again");
      auto again = link.Register(address, 60 * kSecond, signals.stop());
      if (again.ok()) registration->worker_id = again->worker_id;
    } else if (!status.ok()) {
      spdlog::warn("worker: report failed: {}", status.message());
    }
  }

  // Stop taking calls, then let everything that may still answer one do so
  // (the instances answer what they hold; the control queues finish their
  // work) before the service's completion queue closes.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  manager.StopAll();
  for (WorkQueue* queue : {&serving, &background}) {
    absl::Notification drained;
    queue->Post([&drained] { drained.Notify(); });
    drained.WaitForNotification();
  }
  service.Stop();
  std::error_code ignored;
  if (options.cache_dir.empty()) std::filesystem::remove_all(cache_dir, ignored);
  spdlog::info("worker stopped");
  return 0;
}

}  // namespace maitre::worker
