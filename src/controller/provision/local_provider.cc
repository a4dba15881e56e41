#include "controller/provision/local_provider.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/secret_token.h"

extern char** environ;

namespace maitre::controller {
namespace {

// A worker that exits sooner than this after starting counts as dying young.
constexpr Nanos kYoungDeath = 10 * kSecond;
constexpr Nanos kGracePeriod = 3 * kSecond;

}  // namespace

std::string DefaultLocalWorkers(const WorkerTypeTable& types, int cpus) {
  const std::vector<WorkerType>& all = types.types();
  if (all.empty()) return "";
  int total = 0;
  for (const WorkerType& t : all) total += t.cores;
  if (total <= cpus) {
    std::vector<std::string> parts;
    for (const WorkerType& t : all) parts.push_back(absl::StrCat(t.name, ":1"));
    return absl::StrJoin(parts, ",");
  }
  const WorkerType* smallest = &all[0];
  for (const WorkerType& t : all) {
    if (t.cores < smallest->cores) smallest = &t;
  }
  return absl::StrCat(smallest->name, ":", std::max(1, cpus / smallest->cores));
}

LocalProvider::LocalProvider(Options options)
    : options_(std::move(options)),
      cpus_(options_.cpus > 0 ? options_.cpus
                              : std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)))) {}

LocalProvider::~LocalProvider() { Stop(); }

void LocalProvider::Start() {
  (void)MakeDirectories(options_.log_dir);
  (void)MakeDirectories(options_.cache_dir);
  if (options_.inject_after.has_value()) {
    absl::MutexLock lock(&mu_);
    inject_at_ = options_.clock->Now() + *options_.inject_after;
  }
  thread_ = std::thread([this] { Loop(); });
}

void LocalProvider::SetDesired(const WorkerType& type, int count) {
  absl::MutexLock lock(&mu_);
  desired_[type.name] = {type, std::max(0, count)};
}

int LocalProvider::Desired(const std::string& type) const {
  absl::MutexLock lock(&mu_);
  auto it = desired_.find(type);
  return it == desired_.end() ? 0 : it->second.second;
}

void LocalProvider::OnJoin(const std::string& worker_id, const std::string& token) {
  absl::MutexLock lock(&mu_);
  auto it = launched_.find(token);
  if (it == launched_.end()) return;
  it->second.worker_id = worker_id;
  events_.push_back({WorkerEvent::Kind::kReady, it->second.type, token, worker_id,
                     options_.clock->Now(), ""});
}

void LocalProvider::Kill(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  for (auto& [token, w] : launched_) {
    if (w.worker_id == worker_id) kill(w.pid, SIGKILL);
  }
}

bool LocalProvider::Retire(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  for (auto& [token, w] : launched_) {
    if (w.worker_id != worker_id) continue;
    // An interrupted worker no longer counts towards its type's number.
    auto desired = desired_.find(w.type);
    if (!w.stops_at.has_value() && desired != desired_.end() && desired->second.second > 0) {
      --desired->second.second;
    }
    retiring_.insert(token);
    kill(w.pid, SIGTERM);
    return true;
  }
  return false;
}

absl::Status LocalProvider::Interrupt(const std::string& worker_id, Nanos lead) {
  absl::MutexLock lock(&mu_);
  for (auto& [token, w] : launched_) {
    if (!worker_id.empty() && w.worker_id == worker_id) return InterruptLocked(w, lead);
  }
  return absl::NotFoundError(absl::StrCat("no worker ", worker_id, " of this provider"));
}

absl::Status LocalProvider::InterruptLocked(LaunchedWorker& w, Nanos lead) {
  auto desired = desired_.find(w.type);
  if (desired == desired_.end() || desired->second.first.market != WorkerType::Market::kSpot) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", w.worker_id, " (", w.type, ") is on-demand; only spot workers ",
                     "are interrupted (--worker-types NAME:...:spot)"));
  }
  if (w.stops_at.has_value() || retiring_.count(w.token) > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", w.worker_id, " is already stopping"));
  }
  const Nanos now = options_.clock->Now();
  w.stops_at = now + std::max<Nanos>(lead, 0);
  events_.push_back({WorkerEvent::Kind::kInterrupted, w.type, w.token, w.worker_id, now,
                     absl::StrCat("spot interruption notice, ", ToSeconds(lead), " s ahead"),
                     *w.stops_at});
  spdlog::warn("local provider: worker {} ({} {}) interrupted: it stops in {} s; a "
               "replacement starts now",
               w.name, w.type, w.worker_id, ToSeconds(lead));
  return absl::OkStatus();
}

void LocalProvider::InjectLocked() {
  if (!inject_at_.has_value() || options_.clock->Now() < *inject_at_) return;
  LaunchedWorker* oldest = nullptr;
  for (auto& [token, w] : launched_) {
    auto desired = desired_.find(w.type);
    const bool spot = desired != desired_.end() &&
                      desired->second.first.market == WorkerType::Market::kSpot;
    if (spot && !w.worker_id.empty() && !w.stops_at.has_value() && retiring_.count(token) == 0 &&
        (oldest == nullptr || w.started < oldest->started)) {
      oldest = &w;
    }
  }
  if (oldest != nullptr && InterruptLocked(*oldest, options_.inject_lead).ok()) {
    inject_at_.reset();
  }
}

void LocalProvider::EndInterruptedLocked() {
  const Nanos now = options_.clock->Now();
  for (auto& [token, w] : launched_) {
    if (w.stops_at.has_value() && *w.stops_at <= now && retiring_.count(token) == 0) {
      // Killed, not asked to stop: a cloud does not wait for the machine.
      kill(w.pid, SIGKILL);
      w.stops_at = now;
    }
  }
}

std::map<std::string, int> LocalProvider::Starting() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int> starting;
  for (const auto& [token, w] : launched_) {
    if (w.worker_id.empty()) ++starting[w.type];
  }
  return starting;
}

void LocalProvider::OnEvent(std::function<void(const WorkerEvent&)> listener) {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.push_back(std::move(listener));
}

std::vector<int> LocalProvider::ChooseCoresLocked(int count) {
  // The least used cores first; with fewer cores than workers need, cores
  // are shared (documented: the embedded default oversubscribes a 2-core
  // machine so that both worker types exist).
  std::vector<int> use(cpus_, 0);
  for (const auto& [token, w] : launched_) {
    for (int c : w.cores) ++use[c % cpus_];
  }
  std::vector<int> order(cpus_);
  for (int i = 0; i < cpus_; ++i) order[i] = i;
  // Among equally used cores the highest first: the controller and the
  // system tend to run on the low ones.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return use[a] != use[b] ? use[a] < use[b] : a > b;
  });
  order.resize(std::min(count, cpus_));
  std::sort(order.begin(), order.end());
  return order;
}

void LocalProvider::LaunchLocked(const WorkerType& type) {
  LaunchedWorker w;
  w.name = absl::StrCat("L", next_token_++);
  // The worker proves with this that it is the process we started; anyone
  // who could guess it could take the worker's place (docs/operations.md).
  w.token = absl::StrCat(w.name, "-", RandomToken(16));
  w.type = type.name;
  w.cores = ChooseCoresLocked(type.cores);
  // The autoscalers count each worker's cores as its own: say when a core
  // is shared (more workers asked for than this machine has cores).
  for (const auto& [token, other] : launched_) {
    std::vector<int> shared;
    for (int c : w.cores) {
      if (std::find(other.cores.begin(), other.cores.end(), c) != other.cores.end()) {
        shared.push_back(c);
      }
    }
    if (!shared.empty()) {
      spdlog::warn(
          "local provider: {} ({}) shares core(s) {} with {} ({}); the autoscalers count each "
          "worker's cores as its own, so capacity is overcounted (docs/operations.md, \"Local "
          "workers\")",
          w.name, type.name, absl::StrJoin(shared, ","), other.name, other.type);
    }
  }
  w.started = options_.clock->Now();

  // Everything the child needs is prepared before fork: between fork and
  // exec only async-signal-safe calls are allowed.
  std::vector<std::string> args = {options_.binary,
                                   "worker",
                                   "--controller",
                                   options_.controller,
                                   "--type",
                                   type.name,
                                   "--cores",
                                   absl::StrJoin(w.cores, ","),
                                   "--cache-dir",
                                   absl::StrCat(options_.cache_dir, "/", w.name),
                                   // A directory of their own: a confined worker may
                                   // write only there and in its cache.
                                   "--host-speed-file",
                                   absl::StrCat(options_.cache_dir, "/host-speed/", type.name),
                                   "--sandbox",
                                   options_.sandbox,
                                   "--sandbox-user",
                                   options_.sandbox_user};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = {"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1",
                                           absl::StrCat("MAITRE_LAUNCH_TOKEN=", w.token),
                                           absl::StrCat("MAITRE_JOIN_TOKEN=", options_.join_token)};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "OPENBLAS_NUM_THREADS=", 21) != 0 &&
        std::strncmp(*e, "OMP_NUM_THREADS=", 16) != 0 && std::strncmp(*e, "MAITRE_", 7) != 0) {
      env_storage.emplace_back(*e);
    }
  }
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string log_path = absl::StrCat(options_.log_dir, "/worker-", w.name, ".log");
  pid_t parent = getpid();

  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the controller died before prctl
    // A process group of its own: a terminal's Ctrl-C (SIGINT to the whole
    // foreground group) then reaches the controller alone, which drains the
    // requests in flight before it stops the workers.
    setpgid(0, 0);
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    // Nothing else of the controller's (listening sockets, the registry's
    // files) reaches the worker, whatever was opened without O_CLOEXEC.
    close_range(3, ~0U, 0);
    // The controller blocks SIGTERM/SIGINT in its threads; a worker must not
    // inherit that mask or it could never be stopped.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) {
    spdlog::error("local provider: fork failed: {}", std::strerror(errno));
    return;
  }
  w.pid = pid;
  events_.push_back({WorkerEvent::Kind::kStarted, type.name, w.token, "", w.started, ""});
  spdlog::info("local provider: started {} worker {} (pid {}, cores {}, log {})", type.name,
               w.name, pid, absl::StrJoin(w.cores, ","), log_path);
  launched_[w.token] = std::move(w);
}

void LocalProvider::ReapExitedLocked() {
  for (auto it = launched_.begin(); it != launched_.end();) {
    int status = 0;
    pid_t r = waitpid(it->second.pid, &status, WNOHANG);
    if (r == it->second.pid) {
      LaunchedWorker w = it->second;
      it = launched_.erase(it);
      if (stopping_) continue;
      const Nanos now = options_.clock->Now();
      if (retiring_.erase(w.token) > 0) {
        spdlog::info("local provider: worker {} ({} {}) retired", w.name, w.type, w.worker_id);
        events_.push_back({WorkerEvent::Kind::kRetired, w.type, w.token, w.worker_id, now, ""});
        continue;
      }
      std::string how = WIFSIGNALED(status) ? absl::StrCat("killed by signal ", WTERMSIG(status))
                                            : absl::StrCat("exit code ", WEXITSTATUS(status));
      if (w.stops_at.has_value()) {
        // Its replacement started at the notice; no backoff is due.
        events_.push_back({WorkerEvent::Kind::kLost, w.type, w.token, w.worker_id, now,
                           absl::StrCat("spot interruption (", how, ")")});
        spdlog::info("local provider: interrupted worker {} ({} {}) ended", w.name, w.type,
                     w.worker_id);
        continue;
      }
      events_.push_back({WorkerEvent::Kind::kLost, w.type, w.token, w.worker_id, now, how});
      spdlog::warn("local provider: worker {} ({} {}, pid {}) ended: {}", w.name, w.type,
                   w.worker_id, w.pid, how);
      if (now - w.started < kYoungDeath) {
        int deaths = ++quick_deaths_[w.type];
        // 1 s, 2 s, 4 s ... up to a minute between attempts.
        backoff_until_[w.type] = now + std::min<Nanos>(kSecond << std::min(deaths - 1, 6),
                                                       60 * kSecond);
      } else {
        quick_deaths_[w.type] = 0;
      }
    } else {
      ++it;
    }
  }
}

void LocalProvider::ReconcileLocked() {
  Nanos now = options_.clock->Now();
  for (const auto& [name, entry] : desired_) {
    const auto& [type, want] = entry;
    int have = 0;
    for (const auto& [token, w] : launched_) {
      have += w.type == name && retiring_.count(token) == 0 && !w.stops_at.has_value() ? 1 : 0;
    }
    if (have < want) {
      auto backoff = backoff_until_.find(name);
      if (backoff != backoff_until_.end() && now < backoff->second) continue;
      LaunchLocked(type);
    } else if (have > want) {
      // Stop the newest surplus worker; the cluster notices it leave.
      const LaunchedWorker* newest = nullptr;
      for (const auto& [token, w] : launched_) {
        if (w.type == name && retiring_.count(token) == 0 && !w.stops_at.has_value() &&
            (newest == nullptr || w.started > newest->started)) {
          newest = &w;
        }
      }
      if (newest != nullptr) {
        retiring_.insert(newest->token);
        kill(newest->pid, SIGTERM);
      }
    }
  }
}

void LocalProvider::Loop() {
  while (true) {
    std::vector<WorkerEvent> events;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      ReapExitedLocked();
      InjectLocked();
      EndInterruptedLocked();
      ReconcileLocked();
      events.swap(events_);
    }
    if (!events.empty()) {
      absl::MutexLock lock(&listeners_mu_);
      for (const WorkerEvent& e : events) {
        for (const auto& listener : listeners_) listener(e);
      }
    }
    options_.clock->SleepUntil(options_.clock->Now() + 100 * kMillisecond);
  }
  // Shutting down: ask every worker to stop, then insist.
  std::vector<pid_t> pids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [token, w] : launched_) pids.push_back(w.pid);
  }
  for (pid_t pid : pids) kill(pid, SIGTERM);
  Nanos give_up = options_.clock->Now() + kGracePeriod;
  for (pid_t pid : pids) {
    while (waitpid(pid, nullptr, WNOHANG) == 0) {
      if (options_.clock->Now() >= give_up) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        break;
      }
      options_.clock->SleepUntil(options_.clock->Now() + 20 * kMillisecond);
    }
  }
  absl::MutexLock lock(&mu_);
  launched_.clear();
}

void LocalProvider::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace maitre::controller
