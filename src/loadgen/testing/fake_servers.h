// In-process fake inference servers for the load generator's tests and its
// overhead benchmark: an HTTP one (src/http's Server, answering
// /v2/models/{m}/infer and /v2/apps/{a}/infer plus the metadata the bench
// reads) and a gRPC one (inference.GRPCInferenceService, callback API).
//
// Both can hold their answers until the test releases them, which is how
// tests make "the server is slow" exact without reading a clock, or answer
// after a fixed delay (for benchmarks). Both count requests in flight (seen
// and not yet answered) and the most there ever were.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "http/message.h"
#include "http/responder.h"
#include "http/server.h"
#include "inference.pb.h"
#include "nlohmann/json.hpp"

namespace maitre::loadgen::testing {

// Counts requests in flight and holds answers back on request. Shared by
// both fakes.
class AnswerGate {
 public:
  AnswerGate();
  ~AnswerGate();

  // While holding, answers wait for Release*(); with a delay, each answer
  // goes out `delay` after its request arrived (real time).
  void SetHold(bool hold);
  void SetDelay(absl::Duration delay);

  // Registers one request; `send` answers it and is called exactly once:
  // now, after the delay, or on release. Returns the request's index.
  int64_t Arrive(std::function<void()> send);

  void ReleaseOne();  // the oldest held answer
  void ReleaseAll();
  // Stops holding and delaying, and sends every answer still waiting.
  void Drain();

  int64_t received() const;
  int64_t in_flight() const;
  int64_t max_in_flight() const;
  int64_t held() const;

  // Real-time waits for tests; false if the timeout passed first.
  bool WaitForReceived(int64_t n, absl::Duration timeout = absl::Seconds(10)) const;
  bool WaitForHeld(int64_t n, absl::Duration timeout = absl::Seconds(10)) const;

 private:
  void Answer(std::function<void()>& send);
  void DelayLoop();

  mutable absl::Mutex mu_;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int sending_ ABSL_GUARDED_BY(mu_) = 0;  // delayed answers being sent now
  std::deque<std::function<void()>> held_ ABSL_GUARDED_BY(mu_);
  // Delayed answers in arrival order; with one fixed delay, that is also
  // the order they are due.
  std::deque<std::pair<absl::Time, std::function<void()>>> delayed_ ABSL_GUARDED_BY(mu_);
  std::thread delay_thread_;
};

struct ReceivedHttpRequest {
  std::string path;
  std::string content_type;
  std::string header_length;  // the Inference-Header-Content-Length header, as sent
  std::string body;
};

class FakeHttpInferServer {
 public:
  // What to answer request number `index`; by default 200 with timings
  // queue_us 100, compute_us 200, total_us 400 and one FP32 output.
  using AnswerFn = std::function<http::Response(const ReceivedHttpRequest&, int64_t index)>;

  // `metadata` is served at GET /v2/models/{any} and, wrapped as the one
  // model of an app (with defaults latency_ms 50), at GET /v2/apps/{any}.
  static absl::StatusOr<std::unique_ptr<FakeHttpInferServer>> Create(
      nlohmann::json metadata, AnswerFn answer = nullptr, int io_threads = 1);
  ~FakeHttpInferServer();

  std::string url() const;      // http://127.0.0.1:PORT
  std::string address() const;  // 127.0.0.1:PORT
  AnswerGate& gate() { return gate_; }
  std::vector<ReceivedHttpRequest> requests() const;

  static http::Response DefaultAnswer(const ReceivedHttpRequest&, int64_t index);

 private:
  FakeHttpInferServer() = default;

  AnswerGate gate_;
  AnswerFn answer_;
  nlohmann::json metadata_;
  mutable absl::Mutex mu_;
  std::vector<ReceivedHttpRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<http::Server> server_;
};

class FakeGrpcInferServer {
 public:
  // Fills the response (or returns an error) for request number `index`.
  // By default OK with int64 parameters queue_us 100, compute_us 200,
  // total_us 400.
  struct Answer {
    int code = 0;  // a grpc::StatusCode
    std::string message;
  };
  using AnswerFn = std::function<Answer(const inference::ModelInferRequest&,
                                        inference::ModelInferResponse*, int64_t index)>;

  static absl::StatusOr<std::unique_ptr<FakeGrpcInferServer>> Create(AnswerFn answer = nullptr);
  ~FakeGrpcInferServer();

  std::string address() const;  // 127.0.0.1:PORT
  AnswerGate& gate();
  std::vector<inference::ModelInferRequest> requests() const;
  // The peer (client address and port) of each request, in arrival order.
  std::vector<std::string> peers() const;

 private:
  struct Impl;
  explicit FakeGrpcInferServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace maitre::loadgen::testing
