#include "testing/server_process.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/file_util.h"
#include "core/secret_token.h"
#include "http/multipart.h"
#include "testing/wait.h"

namespace maitre::testing {

std::string MaitreBinary() {
  const char* path = std::getenv("MAITRE_BINARY");
  return path != nullptr ? path : "maitre";
}

std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* entry = readdir(proc)) {
    pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
    std::stringstream cmdline;
    cmdline << in.rdbuf();
    if (cmdline.str().find(needle) != std::string::npos) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

bool AllThreadsStopped(pid_t pid) {
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    absl::StatusOr<std::string> stat = ReadFileToString(task.path().string() + "/stat");
    if (!stat.ok()) return false;
    // The state follows the command name, which is in parentheses.
    const size_t paren = stat->rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat->size()) return false;
    const char state = (*stat)[paren + 2];
    if (state != 'T' && state != 't') return false;
  }
  return !ec;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const ServerOptions& options) {
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  server->options_ = options;
  std::string endpoints = absl::StrCat(options.data_dir, "/endpoints.json");
  std::remove(endpoints.c_str());
  std::vector<std::string> args = {MaitreBinary(),     "serve", "--data-dir", options.data_dir,
                                   "--http",           options.http,
                                   "--grpc",           "127.0.0.1:0",
                                   "--control",        "127.0.0.1:0",
                                   "--workers",        options.workers};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string log = absl::StrCat(options.data_dir, "/serve.log");
  (void)MakeDirectories(options.data_dir);
  pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::freopen(log.c_str(), "a", stderr);
    (void)out;
    dup2(STDERR_FILENO, STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid < 0) return absl::InternalError("fork failed");
  server->pid_ = pid;

  // The server writes its real ports to endpoints.json once it listens.
  // The limits are minutes for what takes a second: a busy host is slow.
  bool exited = false;
  WaitUntil(
      [&] {
        if (waitpid(pid, nullptr, WNOHANG) == pid) return exited = true;
        if (auto text = ReadFileToString(endpoints); text.ok()) {
          auto j = nlohmann::json::parse(*text, nullptr, false);
          if (!j.is_discarded()) {
            server->url_ = j.value("http", "");
            server->grpc_address_ = j.value("grpc", "");
            server->control_address_ = j.value("control", "");
          }
        }
        return !server->url_.empty();
      },
      120);
  if (exited) {
    server->pid_ = 0;
    auto text = ReadFileToString(log);
    return absl::InternalError(
        absl::StrCat("maitre serve exited early: ", text.ok() ? *text : ""));
  }
  if (server->url_.empty()) return absl::DeadlineExceededError("maitre serve did not start");
  http::ClientOptions client_options;
  client_options.base_url = server->url_;
  client_options.timeout = 300 * kSecond;
  auto client = http::Client::Create(client_options);
  if (!client.ok()) return client.status();
  server->client_ = *std::move(client);
  // A server that requires API keys made its first admin key before it
  // listened; the helpers below present it.
  if (auto key = ReadTokenFile(options.data_dir + "/admin-key"); key.ok()) {
    server->admin_key_ = *key;
  }
  if (options.workers.empty()) return server;
  // Ready once every requested worker has joined.
  size_t want = 0;
  for (char c : options.workers) want += c == ',' ? 1 : 0;
  ++want;
  if (WaitUntil(
          [&] {
            auto index = server->RepositoryIndex();
            return index.ok() && (*index)["workers"].size() >= want;
          },
          180)) {
    return server;
  }
  return absl::DeadlineExceededError("the workers did not join within 180 s");
}

ServerProcess::~ServerProcess() { (void)Stop(); }

namespace {

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

}  // namespace

absl::Status ServerProcess::Stop() {
  if (pid_ == 0) return absl::OkStatus();
  int status = 0;
  // A server that ended on its own (a crash, a fatal error) fails the test
  // that stops it, rather than passing as a clean stop.
  const bool ended_before = waitpid(pid_, &status, WNOHANG) == pid_;
  if (!ended_before) {
    kill(pid_, SIGTERM);
    if (!WaitUntil([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, 60)) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  pid_ = 0;
  absl::Status left = CheckNothingLeft();
  if (ended_before) {
    return absl::InternalError(
        absl::StrCat("the server had ended before it was stopped: ", DescribeExit(status)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat("the server did not shut down cleanly on SIGTERM: ", DescribeExit(status)));
  }
  return left;
}

absl::StatusOr<int> ServerProcess::AwaitExit() {
  if (pid_ == 0) return absl::FailedPreconditionError("the server is not running");
  int status = 0;
  if (!WaitUntil([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, 120)) {
    return absl::DeadlineExceededError("the server did not exit within 120 s");
  }
  pid_ = 0;
  absl::Status left = CheckNothingLeft();
  if (!left.ok()) return left;
  return status;
}

absl::Status ServerProcess::CheckNothingLeft() {
  // Workers are started with the data directory in their arguments.
  if (WaitUntil([&] { return ProcessesMentioning(options_.data_dir).empty(); }, 30)) {
    return absl::OkStatus();
  }
  std::vector<pid_t> left = ProcessesMentioning(options_.data_dir);
  for (pid_t p : left) kill(p, SIGKILL);
  return absl::InternalError(
      absl::StrCat("processes left running after stop: ", absl::StrJoin(left, ",")));
}

absl::StatusOr<http::Response> ServerProcess::SendAs(const std::string& api_key,
                                                     const std::string& method,
                                                     const std::string& path, std::string body,
                                                     const std::string& content_type) {
  std::vector<http::Header> headers;
  if (!body.empty()) headers.push_back({"Content-Type", content_type});
  if (!api_key.empty()) headers.push_back({"Authorization", BearerValue(api_key)});
  return client_->Send(method, path, std::move(body), std::move(headers));
}

absl::StatusOr<http::Response> ServerProcess::Get(const std::string& path) {
  return SendAs(admin_key_, "GET", path);
}

absl::StatusOr<http::Response> ServerProcess::Post(const std::string& path, std::string body,
                                                   const std::string& content_type) {
  return SendAs(admin_key_, "POST", path, std::move(body), content_type);
}

namespace {

absl::StatusOr<nlohmann::json> JsonOf(const absl::StatusOr<http::Response>& response,
                                      const std::string& what) {
  if (!response.ok()) return response.status();
  if (response->status / 100 != 2) {
    return absl::InternalError(absl::StrCat(what, ": ", response->status, " ", response->body));
  }
  return nlohmann::json::parse(response->body);
}

}  // namespace

absl::StatusOr<nlohmann::json> ServerProcess::GetJson(const std::string& path) {
  return JsonOf(Get(path), "GET " + path);
}

absl::StatusOr<nlohmann::json> ServerProcess::RepositoryIndex() {
  return JsonOf(Post("/v2/repository/index", ""), "POST /v2/repository/index");
}

absl::StatusOr<http::Response> ServerProcess::Register(const std::string& app,
                                                       const std::string& name,
                                                       const std::string& model_path,
                                                       const std::string& onnx_path,
                                                       const std::string& valset_path) {
  std::vector<http::Part> parts;
  auto model = ReadFileToString(model_path);
  if (!model.ok()) return model.status();
  parts.push_back({"model", "model.pt", "application/octet-stream", *model});
  parts.push_back({"meta", "", "application/json",
                   R"({"format":"torchscript",
                       "inputs":[{"name":"input","datatype":"FP32","shape":[-1,1,28,28]}],
                       "outputs":[{"name":"logits","datatype":"FP32","shape":[-1,10]}]})"});
  for (const auto& [part, path] : {std::pair{"onnx", onnx_path}, {"valset", valset_path}}) {
    if (path.empty()) continue;
    auto bytes = ReadFileToString(path);
    if (!bytes.ok()) return bytes.status();
    parts.push_back({part, path, "application/octet-stream", *bytes});
  }
  std::string content_type;
  std::string body = http::EncodeMultipart(parts, &content_type);
  return Post(absl::StrCat("/v2/apps/", app, "/models/", name), std::move(body), content_type);
}

absl::Status ServerProcess::AwaitProfiles(const std::string& app) {
  std::vector<std::string> types;
  for (absl::string_view worker : absl::StrSplit(options_.workers, ',', absl::SkipEmpty())) {
    types.emplace_back(worker.substr(0, worker.find(':')));
  }
  absl::Status waited = WaitOnProgress([&] {
    Progress progress;
    auto j = GetJson(absl::StrCat("/v2/apps/", app));
    if (!j.ok()) {
      progress.where = std::string(j.status().message());
      return progress;
    }
    int variants = 0, pending = 0, ready = 0, profiles = 0, final_profiles = 0, sweeps_left = 0;
    for (const nlohmann::json& m : (*j)["models"]) {
      for (const nlohmann::json& v : m["variants"]) {
        ++variants;
        if (v["state"] == "pending") ++pending;
        if (v["state"] != "ready") continue;
        ++ready;
        const nlohmann::json profiled = v.value("profiles", nlohmann::json::object());
        for (const std::string& type : types) {
          if (!profiled.contains(type)) continue;
          ++profiles;
          const int left = profiled[type].value("sweeps_left", 0);
          sweeps_left += left;
          final_profiles += left == 0 ? 1 : 0;
        }
      }
    }
    const int wanted = ready * static_cast<int>(types.size());
    progress.done = variants > 0 && pending == 0 && final_profiles == wanted;
    progress.where = absl::StrCat(variants, " variants (", pending, " pending); ", profiles, " of ",
                                  wanted, " profiles, ", final_profiles, " final, ", sweeps_left,
                                  " sweeps at most still to go");
    return progress;
  });
  if (waited.ok()) return waited;
  return absl::Status(waited.code(), absl::StrCat("profiling ", app, ": ", waited.message()));
}

std::string ServerProcess::Log() const {
  auto text = ReadFileToString(absl::StrCat(options_.data_dir, "/serve.log"));
  return text.ok() ? *text : std::string(text.status().message());
}

absl::StatusOr<std::vector<pid_t>> ServerProcess::WorkerPids() {
  auto index = RepositoryIndex();
  if (!index.ok()) return index.status();
  std::vector<pid_t> pids;
  for (const auto& w : (*index)["workers"]) {
    absl::StatusOr<pid_t> pid = WorkerPid(w["id"].get<std::string>());
    if (!pid.ok()) return pid.status();
    pids.push_back(*pid);
  }
  return pids;
}

absl::StatusOr<pid_t> ServerProcess::WorkerPid(const std::string& worker_id) const {
  // The cluster logs "worker <id> joined: <type> at <address> (pid <pid>)";
  // a worker that joined again under the same id logs it again, last wins.
  const std::string prefix = absl::StrCat("worker ", worker_id, " joined: ");
  pid_t pid = 0;
  for (absl::string_view line : absl::StrSplit(Log(), '\n')) {
    const size_t at = line.find(prefix);
    const size_t open = line.rfind("(pid ");
    if (at == absl::string_view::npos || open == absl::string_view::npos) continue;
    pid = static_cast<pid_t>(std::atoi(std::string(line.substr(open + 5)).c_str()));
  }
  if (pid <= 0) {
    return absl::NotFoundError(absl::StrCat("no join of worker ", worker_id, " in the log"));
  }
  return pid;
}

}  // namespace maitre::testing
