#include "loadgen/testing/fake_servers.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "http/router.h"
#include "inference.grpc.pb.h"

namespace maitre::loadgen::testing {

AnswerGate::AnswerGate() : delay_thread_([this] { DelayLoop(); }) {}

AnswerGate::~AnswerGate() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  delay_thread_.join();
  Drain();
}

void AnswerGate::SetHold(bool hold) {
  absl::MutexLock lock(&mu_);
  hold_ = hold;
}

void AnswerGate::SetDelay(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  delay_ = delay;
}

int64_t AnswerGate::Arrive(std::function<void()> send) {
  int64_t index;
  {
    absl::MutexLock lock(&mu_);
    index = received_++;
    max_in_flight_ = std::max(max_in_flight_, received_ - answered_);
    if (hold_) {
      held_.push_back(std::move(send));
      return index;
    }
    if (delay_ > absl::ZeroDuration()) {
      delayed_.emplace_back(absl::Now() + delay_, std::move(send));
      return index;
    }
  }
  Answer(send);
  return index;
}

// Counts the answer before sending it, so a client that reacts to it by
// sending its next request never sees both counted in flight.
void AnswerGate::Answer(std::function<void()>& send) {
  {
    absl::MutexLock lock(&mu_);
    ++answered_;
  }
  send();
}

void AnswerGate::ReleaseOne() {
  std::function<void()> send;
  {
    absl::MutexLock lock(&mu_);
    if (held_.empty()) return;
    send = std::move(held_.front());
    held_.pop_front();
  }
  Answer(send);
}

void AnswerGate::ReleaseAll() {
  std::deque<std::function<void()>> all;
  {
    absl::MutexLock lock(&mu_);
    all.swap(held_);
  }
  for (auto& send : all) Answer(send);
}

void AnswerGate::Drain() {
  std::deque<std::function<void()>> held;
  std::deque<std::pair<absl::Time, std::function<void()>>> delayed;
  {
    absl::MutexLock lock(&mu_);
    hold_ = false;
    delay_ = absl::ZeroDuration();
    held.swap(held_);
    delayed.swap(delayed_);
    // An answer the delay thread is sending right now must be out before
    // the caller tears the server down.
    mu_.Await(absl::Condition(
        +[](int* sending) { return *sending == 0; }, &sending_));
  }
  for (auto& send : held) Answer(send);
  for (auto& [due, send] : delayed) Answer(send);
}

void AnswerGate::DelayLoop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    if (delayed_.empty()) {
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](AnswerGate* g) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                 return g->stop_ || !g->delayed_.empty();
                               },
                               this),
                           absl::Milliseconds(100));
      continue;
    }
    const absl::Time due = delayed_.front().first;
    if (absl::Now() < due) {
      mu_.AwaitWithDeadline(absl::Condition(&stop_), due);
      continue;
    }
    std::function<void()> send = std::move(delayed_.front().second);
    delayed_.pop_front();
    ++answered_;
    ++sending_;
    mu_.Unlock();
    send();
    mu_.Lock();
    --sending_;
  }
  // Whatever is still delayed goes out now, so no client waits forever.
  while (!delayed_.empty()) {
    std::function<void()> send = std::move(delayed_.front().second);
    delayed_.pop_front();
    ++answered_;
    mu_.Unlock();
    send();
    mu_.Lock();
  }
}

int64_t AnswerGate::received() const {
  absl::MutexLock lock(&mu_);
  return received_;
}

int64_t AnswerGate::in_flight() const {
  absl::MutexLock lock(&mu_);
  return received_ - answered_;
}

int64_t AnswerGate::max_in_flight() const {
  absl::MutexLock lock(&mu_);
  return max_in_flight_;
}

int64_t AnswerGate::held() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(held_.size());
}

bool AnswerGate::WaitForReceived(int64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return received_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

bool AnswerGate::WaitForHeld(int64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return static_cast<int64_t>(held_.size()) >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

// ---------------------------------------------------------------- HTTP fake

http::Response FakeHttpInferServer::DefaultAnswer(const ReceivedHttpRequest&, int64_t) {
  return http::Response::Json(
      200,
      R"({"model_name":"m","model_version":"v","id":"","parameters":{"worker":"w","queue_us":100,)"
      R"("compute_us":200,"total_us":400,"batch_size":1},"outputs":[{"name":"logits",)"
      R"("datatype":"FP32","shape":[1,2],"data":[0.25,0.75]}]})");
}

absl::StatusOr<std::unique_ptr<FakeHttpInferServer>> FakeHttpInferServer::Create(
    nlohmann::json metadata, AnswerFn answer, int io_threads) {
  std::unique_ptr<FakeHttpInferServer> fake(new FakeHttpInferServer());
  fake->answer_ = answer ? std::move(answer) : AnswerFn(&DefaultAnswer);
  fake->metadata_ = std::move(metadata);
  FakeHttpInferServer* self = fake.get();
  http::Router router;
  auto infer = [self](http::Request&& request, const http::PathParams&, http::Responder respond) {
    ReceivedHttpRequest received;
    received.path = request.path;
    received.content_type = std::string(request.GetHeader("Content-Type"));
    received.header_length = std::string(request.GetHeader("Inference-Header-Content-Length"));
    received.body = std::move(request.body);
    int64_t index;
    {
      absl::MutexLock lock(&self->mu_);
      index = static_cast<int64_t>(self->requests_.size());
      self->requests_.push_back(received);
    }
    // The answer is computed when it goes out; the responder is move-only,
    // so it travels in a shared_ptr through the copyable std::function.
    auto responder = std::make_shared<http::Responder>(std::move(respond));
    auto shared = std::make_shared<ReceivedHttpRequest>(std::move(received));
    self->gate_.Arrive([self, responder, shared, index] {
      std::move(*responder)(self->answer_(*shared, index));
    });
  };
  router.Add("POST", "/v2/models/{model}/infer", infer);
  router.Add("POST", "/v2/apps/{app}/infer", infer);
  router.Add("GET", "/v2/models/{model}",
             [self](http::Request&&, const http::PathParams&, http::Responder respond) {
               std::move(respond)(http::Response::Json(200, self->metadata_.dump()));
             });
  router.Add("GET", "/v2/apps/{app}",
             [self](http::Request&&, const http::PathParams& p, http::Responder respond) {
               nlohmann::json app{{"name", p.at("app")},
                                  {"defaults", {{"latency_ms", 50}}},
                                  {"models", nlohmann::json::array({self->metadata_})}};
               std::move(respond)(http::Response::Json(200, app.dump()));
             });
  http::ServerOptions options;
  options.address = "127.0.0.1:0";
  options.threads = io_threads;
  auto server = http::Server::Create(options, std::move(router));
  if (!server.ok()) return server.status();
  fake->server_ = *std::move(server);
  fake->server_->Start();
  return fake;
}

FakeHttpInferServer::~FakeHttpInferServer() {
  gate_.Drain();
  if (server_) server_->Stop();
}

std::string FakeHttpInferServer::url() const { return absl::StrCat("http://", address()); }

std::string FakeHttpInferServer::address() const {
  return absl::StrCat("127.0.0.1:", server_->port());
}

std::vector<ReceivedHttpRequest> FakeHttpInferServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

// ---------------------------------------------------------------- gRPC fake

namespace {

class FakeService final : public inference::GRPCInferenceService::CallbackService {
 public:
  FakeService(AnswerGate* gate, FakeGrpcInferServer::AnswerFn answer)
      : gate_(gate), answer_(std::move(answer)) {}

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    int64_t index;
    {
      absl::MutexLock lock(&mu_);
      index = static_cast<int64_t>(requests_.size());
      requests_.push_back(*request);
      peers_.push_back(context->peer());
    }
    // The request and response live until Finish(), so the answer may be
    // computed when it goes out.
    gate_->Arrive([this, reactor, request, response, index] {
      FakeGrpcInferServer::Answer a = answer_(*request, response, index);
      reactor->Finish(grpc::Status(static_cast<grpc::StatusCode>(a.code), a.message));
    });
    return reactor;
  }

  std::vector<inference::ModelInferRequest> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  std::vector<std::string> peers() const {
    absl::MutexLock lock(&mu_);
    return peers_;
  }

 private:
  AnswerGate* gate_;
  FakeGrpcInferServer::AnswerFn answer_;
  mutable absl::Mutex mu_;
  std::vector<inference::ModelInferRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> peers_ ABSL_GUARDED_BY(mu_);
};

FakeGrpcInferServer::Answer DefaultGrpcAnswer(const inference::ModelInferRequest& request,
                                              inference::ModelInferResponse* response, int64_t) {
  response->set_model_name(request.model_name());
  auto& parameters = *response->mutable_parameters();
  parameters["queue_us"].set_int64_param(100);
  parameters["compute_us"].set_int64_param(200);
  parameters["total_us"].set_int64_param(400);
  return {};
}

}  // namespace

struct FakeGrpcInferServer::Impl {
  AnswerGate gate;
  std::unique_ptr<FakeService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

FakeGrpcInferServer::FakeGrpcInferServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<FakeGrpcInferServer>> FakeGrpcInferServer::Create(AnswerFn answer) {
  auto impl = std::make_unique<Impl>();
  impl->service =
      std::make_unique<FakeService>(&impl->gate, answer ? std::move(answer) : &DefaultGrpcAnswer);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    return absl::UnavailableError("the fake gRPC server could not start");
  }
  return std::unique_ptr<FakeGrpcInferServer>(new FakeGrpcInferServer(std::move(impl)));
}

FakeGrpcInferServer::~FakeGrpcInferServer() {
  impl_->gate.Drain();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->server->Wait();
}

std::string FakeGrpcInferServer::address() const { return absl::StrCat("127.0.0.1:", impl_->port); }

AnswerGate& FakeGrpcInferServer::gate() { return impl_->gate; }

std::vector<inference::ModelInferRequest> FakeGrpcInferServer::requests() const {
  return impl_->service->requests();
}

std::vector<std::string> FakeGrpcInferServer::peers() const { return impl_->service->peers(); }

}  // namespace maitre::loadgen::testing
