#include "generator/variant_generator.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/clock.h"
#include "core/file_util.h"
#include "core/sandbox.h"
#include "core/status_macros.h"
#include "generator/variant_generator_scripts.h"  // generated from scripts/*.py

extern char** environ;

namespace maitre::generator {
namespace {

// Exit codes of the scripts; keep in step with generator/maitre_common.py.
constexpr int kExitBadModel = 3;
constexpr int kExitNothingToDo = 4;
constexpr int kExitUnavailable = 5;
constexpr int kExitStepFailed = 6;

// The line a script prints before exiting with one of the codes above.
constexpr absl::string_view kErrorPrefix = "maitre-generator: error: ";

// How much of the child's output is kept (its end), and how much of that
// goes into a status message. torch errors can be pages of C++ frames.
constexpr size_t kKeptOutputBytes = 64 * 1024;
constexpr int kReportedLines = 12;
constexpr size_t kReportedBytes = 3000;

absl::StatusOr<std::string> Script(absl::string_view name) {
  for (const EmbeddedGeneratorScript& script : kEmbeddedGeneratorScripts) {
    if (name == script.name) return std::string(script.text);
  }
  return absl::InternalError(absl::StrCat("generator script ", name, " is not embedded"));
}

// A private subdirectory of GeneratorOptions::work_dir, removed with its
// contents when this goes away.
class ScratchDir {
 public:
  static absl::StatusOr<ScratchDir> Create(const std::string& work_dir) {
    std::string base = work_dir;
    if (base.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    MAITRE_RETURN_IF_ERROR(MakeDirectories(base));
    // Absolute, because the child runs inside it and is handed paths in it.
    std::error_code error;
    std::filesystem::path absolute = std::filesystem::absolute(base, error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot resolve ", base, ": ", error.message()));
    }
    std::string pattern = absolute.string() + "/maitre-generator-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a scratch directory in ", base, ": ",
                                              std::strerror(errno)));
    }
    return ScratchDir(std::string(buf.data()));
  }

  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ignored;  // nothing useful to do if cleanup fails
    std::filesystem::remove_all(path_, ignored);
  }

  const std::string& path() const { return path_; }
  std::string File(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

struct ChildResult {
  enum class End { kExited, kSignaled, kTimedOut };
  End end = End::kExited;
  int code = 0;    // exit status for kExited, signal number for kSignaled
  std::string output;  // the end of stdout and stderr together
};

// The child's environment: ours, with thread counts pinned to one. The
// controller's workers share this machine, and OpenBLAS and OpenMP threads
// spinning beside torch's cost more than they give on a small conversion.
std::vector<std::string> ChildEnvironment(const std::string& scratch) {
  const std::vector<std::pair<std::string, std::string>> pinned = {
      // A confined child may write only in its scratch directory.
      {"HOME", scratch}, {"TMPDIR", scratch},
      {"OPENBLAS_NUM_THREADS", "1"}, {"OMP_NUM_THREADS", "1"},  {"MKL_NUM_THREADS", "1"},
      {"OMP_WAIT_POLICY", "PASSIVE"}, {"PYTHONUNBUFFERED", "1"},
      // The scratch directory is removed anyway; do not litter it, or a
      // read-only install, with bytecode caches.
      {"PYTHONDONTWRITEBYTECODE", "1"}};
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry(*e);
    bool overridden = false;
    for (const auto& [key, value] : pinned) {
      if (absl::StartsWith(entry, key + "=")) overridden = true;
    }
    if (!overridden) env.emplace_back(entry);
  }
  for (const auto& [key, value] : pinned) env.push_back(key + "=" + value);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void AppendKeepingEnd(std::string* output, const char* data, size_t n) {
  output->append(data, n);
  if (output->size() > 2 * kKeptOutputBytes) output->erase(0, output->size() - kKeptOutputBytes);
}

// Runs argv[0] (looked up on PATH when it has no '/') in `cwd`, with stdin
// from /dev/null and stdout and stderr into one pipe, in its own process
// group so that a timeout kills whatever it started too. posix_spawn rather
// than fork: the controller is multi-threaded and may be large, and nothing
// may run between fork and exec that is not async-signal-safe anyway.
absl::StatusOr<ChildResult> RunChild(std::vector<std::string> argv, const std::string& cwd,
                                     Nanos timeout, const SandboxOptions& sandbox) {
  // A child runs on real time whatever clock the caller uses, so the
  // deadline is kept on the steady clock.
  const Clock* clock = SteadyClock::Get();
  const Nanos deadline = clock->Now() + timeout;

  // The sandbox user may not see why a path fails; say it as this process
  // sees it.
  if (absl::StrContains(argv[0], '/') && access(argv[0].c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", argv[0], ": ", std::strerror(errno)));
  }
  // Entered by descriptor: the sandbox user may not pass through the
  // directories above it.
  const int cwd_fd = open(cwd.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cwd_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", cwd, ": ", std::strerror(errno)));
  }
  int pipe_fds[2];
  // O_CLOEXEC: other threads spawning at the same time must not inherit the
  // write end, or this side would wait for their children to close it.
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    close(cwd_fd);
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addfchdir_np(&actions, cwd_fd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  // Signals this process ignores (SIGPIPE, typically) stay ignored across
  // exec unless reset here.
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> env = ChildEnvironment(cwd);
  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_env = CStrings(env);
  pid_t pid = -1;
  int rc = 0;
  absl::Status confined;
  // The child inherits its parent thread's confinement (core/sandbox.h), and
  // this process runs other work on its threads: a thread of its own is
  // confined and starts the child, then ends.
  std::thread spawner([&] {
    absl::StatusOr<SandboxReport> report = ConfineCallingThread(sandbox);
    if (!report.ok()) {
      confined = report.status();
      return;
    }
    rc = absl::StrContains(argv[0], '/')
             ? posix_spawn(&pid, argv[0].c_str(), &actions, &attr, c_argv.data(), c_env.data())
             : posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, c_argv.data(), c_env.data());
  });
  spawner.join();
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(pipe_fds[1]);
  close(cwd_fd);
  if (!confined.ok() || rc != 0) {
    close(pipe_fds[0]);
    if (!confined.ok()) return confined;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", argv[0], ": ", std::strerror(rc)));
  }

  ChildResult result;
  bool timed_out = false;
  char buf[8192];
  for (;;) {
    Nanos left = deadline - clock->Now();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(std::min<Nanos>(left / kMillisecond + 1, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // EOF: the child, and anything it started, closed the pipe
    AppendKeepingEnd(&result.output, buf, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);

  // The child may close its output and still run; it gets until the same
  // deadline to exit.
  int status = 0;
  for (;;) {
    if (timed_out) {
      // Until it is reaped the child's pid (and so its process group id)
      // cannot be reused, so this kills only what it started.
      kill(-pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      result.end = ChildResult::End::kTimedOut;
      result.code = 0;
      break;
    }
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (WIFSIGNALED(status)) {
        result.end = ChildResult::End::kSignaled;
        result.code = WTERMSIG(status);
      } else {
        result.end = ChildResult::End::kExited;
        result.code = WEXITSTATUS(status);
      }
      break;
    }
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid for ", argv[0], ": ", std::strerror(errno)));
    }
    if (clock->Now() >= deadline) {
      timed_out = true;
      continue;
    }
    usleep(2000);
  }
  return result;
}

// The last lines the child wrote, for a status message, without the
// script's error line (the message leads with that already).
std::string OutputTail(absl::string_view output) {
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipWhitespace())) {
    if (!absl::StartsWith(line, kErrorPrefix)) lines.push_back(line);
  }
  size_t first = lines.size() > kReportedLines ? lines.size() - kReportedLines : 0;
  std::string tail = absl::StrJoin(lines.begin() + first, lines.end(), "\n");
  if (tail.size() > kReportedBytes) tail = "..." + tail.substr(tail.size() - kReportedBytes);
  return tail;
}

// The script's own one-line diagnosis, if it printed one.
std::string ErrorLine(absl::string_view output) {
  size_t at = output.rfind(kErrorPrefix);
  if (at == absl::string_view::npos) return "";
  absl::string_view line = output.substr(at + kErrorPrefix.size());
  return std::string(line.substr(0, line.find('\n')));
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

// Maps how the child ended to a status (see the header), or OK.
absl::Status StepStatus(absl::string_view step, const std::string& python, Nanos timeout,
                        const ChildResult& child) {
  std::string tail = OutputTail(child.output);
  std::string reason = ErrorLine(child.output);
  std::string said = !tail.empty()  ? absl::StrCat("; python's last output:\n", tail)
                     : reason.empty() ? " (python wrote nothing)"
                                      : "";
  switch (child.end) {
    case ChildResult::End::kTimedOut:
      return absl::DeadlineExceededError(absl::StrCat(step, " ran past its timeout of ",
                                                      ToSeconds(timeout), " s and was killed",
                                                      said));
    case ChildResult::End::kSignaled:
      return absl::InternalError(absl::StrCat(step, ": ", python, " was killed by ",
                                              SignalName(child.code), said));
    case ChildResult::End::kExited:
      break;
  }
  if (child.code == 0) return absl::OkStatus();
  if (reason.empty()) reason = absl::StrCat(python, " exited with status ", child.code);
  std::string message = absl::StrCat(step, ": ", reason, said);
  switch (child.code) {
    case kExitBadModel:
      return absl::InvalidArgumentError(message);
    case kExitNothingToDo:
    case kExitUnavailable:
      return absl::FailedPreconditionError(message);
    case kExitStepFailed:
    default:
      return absl::InternalError(message);
  }
}

// What a step's child may do: read the system (python and torch live in
// /usr), execute from /usr, and read and write its scratch directory, which
// the sandbox user is given. It may connect nowhere.
absl::StatusOr<SandboxOptions> ChildSandbox(const ScratchDir& dir, const std::string& python,
                                            const GeneratorOptions& options) {
  SandboxOptions sandbox;
  sandbox.mode = options.sandbox;
  sandbox.user = options.sandbox_user;
  sandbox.read_paths = SystemReadPaths();
  sandbox.exec_paths = {"/usr"};
  if (absl::StrContains(python, '/')) sandbox.exec_paths.push_back(python);
  sandbox.write_paths = {dir.path()};
  if (sandbox.mode != SandboxMode::kOff && geteuid() == 0 && !sandbox.user.empty()) {
    MAITRE_RETURN_IF_ERROR(HandTreeTo(dir.path(), sandbox.user));
  }
  return sandbox;
}

// Writes the shared module and `script` into a scratch directory, runs it
// with `args` (names in that directory, where it starts) and returns its
// exit as a status.
absl::Status RunScript(absl::string_view step, absl::string_view script,
                       const std::vector<std::string>& args, const ScratchDir& dir,
                       const GeneratorOptions& options) {
  if (options.timeout <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(step, ": the timeout must be positive"));
  }
  for (absl::string_view name : {absl::string_view("maitre_common.py"), script}) {
    MAITRE_ASSIGN_OR_RETURN(std::string text, Script(name));
    MAITRE_RETURN_IF_ERROR(WriteFileAtomically(dir.File(name), text));
  }
  // The child starts in the scratch directory, so a relative interpreter
  // path is resolved here, against this process's directory.
  std::string python = options.python;
  if (absl::StrContains(python, '/') && python[0] != '/') {
    std::error_code error;
    python = std::filesystem::absolute(python, error).string();
  }
  // The scripts are read by names relative to the scratch directory, where
  // the child starts: `python3 script.py` and `import` open files by
  // absolute paths, through directories the sandbox user may not enter. So
  // the shared module is loaded by hand and the script run from its text.
  std::vector<std::string> argv = {
      python, "-c",
      "import sys, types\n"
      "common = types.ModuleType('maitre_common')\n"
      "exec(compile(open('maitre_common.py').read(), 'maitre_common.py', 'exec'), "
      "common.__dict__)\n"
      "sys.modules['maitre_common'] = common\n"
      "sys.argv = sys.argv[1:]\n"
      "exec(compile(open(sys.argv[0]).read(), sys.argv[0], 'exec'))\n",
      std::string(script)};
  argv.insert(argv.end(), args.begin(), args.end());
  MAITRE_ASSIGN_OR_RETURN(SandboxOptions sandbox, ChildSandbox(dir, python, options));
  absl::StatusOr<ChildResult> child =
      RunChild(std::move(argv), dir.path(), options.timeout, sandbox);
  if (!child.ok()) {
    return absl::Status(child.status().code(), absl::StrCat(step, ": ", child.status().message()));
  }
  absl::Status status = StepStatus(step, options.python, options.timeout, *child);
  if (status.ok()) return status;
  // The message becomes a variant's detail, which any client can read
  // (GET /v2/apps/{app}): python names the scripts and files by their
  // scratch paths, which say nothing to a client about the model.
  return absl::Status(status.code(),
                      absl::StrReplaceAll(status.message(), {{dir.path() + "/", ""}}));
}

// The shape both steps share: model and spec in, one file out.
absl::StatusOr<std::string> RunModelStep(absl::string_view step, absl::string_view script,
                                         absl::string_view out_name,
                                         absl::string_view torchscript, const ModelSpec& spec,
                                         const GeneratorOptions& options) {
  if (spec.format != ModelFormat::kTorchScript) {
    return absl::InvalidArgumentError(absl::StrCat(
        step, " takes a TorchScript model; the spec says ", ModelFormatName(spec.format)));
  }
  if (spec.inputs.empty() || spec.outputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(step, ": the spec declares no inputs or no outputs"));
  }
  if (torchscript.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(step, ": the model file is empty"));
  }
  MAITRE_ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::Create(options.work_dir));
  std::string model = dir.File("model.pt");
  std::string spec_json = dir.File("spec.json");
  std::string out = dir.File(out_name);
  MAITRE_RETURN_IF_ERROR(WriteFileAtomically(model, torchscript));
  MAITRE_RETURN_IF_ERROR(WriteFileAtomically(spec_json, ModelSpecToJson(spec)));
  MAITRE_RETURN_IF_ERROR(
      RunScript(step, script, {"model.pt", "spec.json", std::string(out_name)}, dir, options));
  absl::StatusOr<std::string> result = ReadFileToString(out);
  if (!result.ok()) {
    return absl::InternalError(absl::StrCat(step, " exited cleanly but wrote no output: ",
                                            result.status().message()));
  }
  return result;
}

}  // namespace

absl::StatusOr<std::string> QuantizeInt8(absl::string_view torchscript, const ModelSpec& spec,
                                         const GeneratorOptions& options) {
  return RunModelStep("int8 quantisation", "quantize_int8.py", "model-int8.pt", torchscript, spec,
                      options);
}

absl::StatusOr<std::string> ExportOnnx(absl::string_view torchscript, const ModelSpec& spec,
                                       const GeneratorOptions& options) {
  for (const std::vector<TensorSpec>* tensors : {&spec.inputs, &spec.outputs}) {
    for (const TensorSpec& t : *tensors) {
      if (t.dtype != DataType::kFp32) {
        return absl::FailedPreconditionError(absl::StrCat(
            "ONNX export: OpenCV DNN runs FP32 models only, and '", t.name, "' is ",
            DataTypeName(t.dtype)));
      }
    }
  }
  return RunModelStep("ONNX export", "export_onnx.py", "model.onnx", torchscript, spec, options);
}

absl::Status CheckOptimizerAvailable(const GeneratorOptions& options) {
  MAITRE_ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::Create(options.work_dir));
  absl::Status status = RunScript("optimiser check", "check_available.py", {}, dir, options);
  // Whatever broke (a python that is not Python 3, a torch that crashes on
  // import), the answer is that the optimiser cannot run here.
  if (status.ok() || absl::IsDeadlineExceeded(status)) return status;
  return absl::FailedPreconditionError(status.message());
}

}  // namespace maitre::generator
