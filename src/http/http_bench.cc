// Latency of one HTTP round trip through maitre_http on loopback: the sync
// Client POSTs an 8 KB JSON body over keep-alive and the Server's handler
// answers with a small JSON document. Reports per-request percentiles
// (p50_us is the median) besides Google Benchmark's mean. BM_RawTcpRoundTrip
// moves the same number of bytes over plain blocking sockets, so the
// difference between the two medians is what the HTTP layer adds.
//
//   http_bench --benchmark_repetitions=3
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "http/client.h"
#include "http/server.h"

namespace maitre::http {
namespace {

// An Open Inference Protocol request body padded to 8 KB.
std::string InferBody() {
  std::string data;
  while (data.size() < 8000) absl::StrAppend(&data, data.empty() ? "" : ",", "0.123456");
  std::string body = absl::StrCat(R"({"inputs":[{"name":"x","shape":[1,)", 1000,
                                  R"(],"datatype":"FP32","data":[)", data, "]}]}");
  body.resize(8192, ' ');
  return body;
}

constexpr char kAnswer[] =
    R"({"model_name":"m","model_version":"1","outputs":[{"name":"y","shape":[1,1],)"
    R"("datatype":"FP32","data":[0.5]}]})";

// A single worker thread, standing in for a gRPC completion thread that
// answers requests off the io thread.
class Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    thread_.join();
  }
  void Post(std::function<void()> task) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](Worker* w)
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return w->done_ || !w->tasks_.empty(); },
            this));
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

void ReportPercentiles(benchmark::State& state, std::vector<double>& micros) {
  if (micros.empty()) return;
  std::sort(micros.begin(), micros.end());
  auto at = [&](double q) { return micros[static_cast<size_t>(q * (micros.size() - 1))]; };
  state.counters["p50_us"] = at(0.50);
  state.counters["p90_us"] = at(0.90);
  state.counters["p99_us"] = at(0.99);
}

// range(0): 1 = the handler answers from another thread.
void BM_Post8KRoundTrip(benchmark::State& state) {
  const bool off_thread = state.range(0) == 1;
  Worker worker;
  Router router;
  router.Add("POST", "/v2/models/{name}/infer",
             [&](Request&& request, const PathParams&, Responder respond) {
               if (request.body.size() != 8192) {
                 std::move(respond)(Response::Error(400, "unexpected body"));
               } else if (off_thread) {
                 worker.Post([respond = std::make_shared<Responder>(std::move(respond))] {
                   std::move (*respond)(Response::Json(200, kAnswer));
                 });
               } else {
                 std::move(respond)(Response::Json(200, kAnswer));
               }
             });
  ServerOptions server_options;
  server_options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Create(server_options, std::move(router));
  if (!server.ok()) {
    state.SkipWithError(std::string(server.status().message()).c_str());
    return;
  }
  (*server)->Start();
  ClientOptions client_options;
  client_options.base_url = absl::StrCat("http://127.0.0.1:", (*server)->port());
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(client_options);
  if (!client.ok()) {
    state.SkipWithError(std::string(client.status().message()).c_str());
    return;
  }
  const std::string body = InferBody();
  // Warm up the connection so the first sample is not a connect.
  (void)(*client)->Send("POST", "/v2/models/m/infer", body);

  std::vector<double> micros;
  micros.reserve(1 << 20);
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Response> response = (*client)->Send("POST", "/v2/models/m/infer", body);
    auto end = std::chrono::steady_clock::now();
    if (!response.ok() || response->status != 200) {
      state.SkipWithError("request failed");
      break;
    }
    micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  ReportPercentiles(state, micros);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * body.size());
}
BENCHMARK(BM_Post8KRoundTrip)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("off_thread")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The smallest request: GET with no body, for the fixed cost per request.
void BM_GetRoundTrip(benchmark::State& state) {
  Router router;
  router.Add("GET", "/v2/health/live", [](Request&&, const PathParams&, Responder respond) {
    std::move(respond)(Response::Json(200, "{}"));
  });
  ServerOptions server_options;
  server_options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Create(server_options, std::move(router));
  if (!server.ok()) {
    state.SkipWithError(std::string(server.status().message()).c_str());
    return;
  }
  (*server)->Start();
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Create({absl::StrCat("http://127.0.0.1:", (*server)->port()), 30 * kSecond});
  if (!client.ok()) {
    state.SkipWithError(std::string(client.status().message()).c_str());
    return;
  }
  std::vector<double> micros;
  micros.reserve(1 << 20);
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Response> response = (*client)->Send("GET", "/v2/health/live");
    auto end = std::chrono::steady_clock::now();
    if (!response.ok() || response->status != 200) {
      state.SkipWithError("request failed");
      break;
    }
    micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  ReportPercentiles(state, micros);
}
BENCHMARK(BM_GetRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool RecvAll(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t n = recv(fd, data, size, 0);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The floor: the same request and answer sizes as BM_Post8KRoundTrip
// (8192-byte body plus a ~113-byte head; a 180-byte answer), exchanged by
// blocking sockets with no HTTP and no event loop.
void BM_RawTcpRoundTrip(benchmark::State& state) {
  constexpr size_t kRequestBytes = 8192 + 113;
  constexpr size_t kAnswerBytes = 180;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    state.SkipWithError("cannot listen");
    close(listener);
    return;
  }
  std::thread echo([listener] {
    int fd = accept(listener, nullptr, nullptr);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string request(kRequestBytes, '\0');
    std::string answer(kAnswerBytes, 'a');
    while (RecvAll(fd, request.data(), request.size()) &&
           SendAll(fd, answer.data(), answer.size())) {
    }
    close(fd);
  });
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    state.SkipWithError("cannot connect");
  } else {
    std::string request(kRequestBytes, 'r');
    std::string answer(kAnswerBytes, '\0');
    std::vector<double> micros;
    micros.reserve(1 << 20);
    for (auto _ : state) {
      auto start = std::chrono::steady_clock::now();
      if (!SendAll(fd, request.data(), request.size()) ||
          !RecvAll(fd, answer.data(), answer.size())) {
        state.SkipWithError("exchange failed");
        break;
      }
      auto end = std::chrono::steady_clock::now();
      micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    ReportPercentiles(state, micros);
  }
  shutdown(fd, SHUT_RDWR);
  close(fd);
  echo.join();
  close(listener);
}
BENCHMARK(BM_RawTcpRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace maitre::http

BENCHMARK_MAIN();
