#include "worker/worker_main.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/cores.h"
#include "core/stop_signal.h"
#include "core/work_queue.h"
#include "runtime/executor.h"
#include "runtime/process_stats.h"
#include "core/logging.h"
#include "worker/controller_link.h"
#include "worker/instance_manager.h"
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

std::string HostOf(const std::string& address) {
  return address.substr(0, address.rfind(':'));
}

}  // namespace

int RunWorker(const WorkerOptions& options) {
  // OpenBLAS threads fight torch's own; the worker's parallelism is torch's.
  setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/0);
  SignalWatcher signals;
  if (absl::Status s = PinCallingThread(options.cores); !s.ok()) {
    spdlog::warn("worker: {}", s.message());
  }

  std::string cache_dir = options.cache_dir;
  if (cache_dir.empty()) {
    cache_dir = absl::StrCat(std::filesystem::temp_directory_path().string(), "/maitre-worker-",
                             getpid());
  }
  const Clock* clock = SteadyClock::Get();

  ControllerLink link({options.controller, options.type, options.launch_token, clock});
  InstanceManager::Options manager_options;
  manager_options.cache_dir = cache_dir;
  manager_options.host_speed_file = options.host_speed_file;
  manager_options.blobs = &link;
  manager_options.clock = clock;
  InstanceManager manager(manager_options);
  WorkQueue control(/*threads=*/1);
  WorkerService service(&manager, clock, &control);

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
  spdlog::info("worker {} ({}, {} core(s)) serving on {}", registration->worker_id, options.type,
               registration->cores, address);

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
  // (the instances answer what they hold; the control queue finishes its
  // work) before the service's completion queue closes.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  manager.StopAll();
  absl::Notification control_drained;
  control.Post([&control_drained] { control_drained.Notify(); });
  control_drained.WaitForNotification();
  service.Stop();
  std::error_code ignored;
  if (options.cache_dir.empty()) std::filesystem::remove_all(cache_dir, ignored);
  spdlog::info("worker stopped");
  return 0;
}

}  // namespace maitre::worker
