#include "worker/worker_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/secret_token.h"
#include "core/thread_name.h"
#include "rpc/convert.h"

namespace maitre::worker {
namespace {

// What the completion queue hands back: a call that has arrived, or whose
// answer has gone out.
class Tag {
 public:
  virtual ~Tag() = default;
  virtual void Proceed(bool ok) = 0;
};

// The gRPC deadline is an absolute wall-clock time; the instance works on
// the injected clock, so convert through the time remaining.
Nanos DeadlineOnClock(const grpc::ServerContext& context, const Clock& clock) {
  auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return kInfiniteFuture;
  auto remaining = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       deadline - std::chrono::system_clock::now())
                       .count();
  return clock.Now() + remaining;
}

}  // namespace

// One unary call, from the moment the service asks for it until its answer
// has gone out: then it deletes itself.
template <typename Request, typename Response>
class WorkerService::Call final : public Tag {
 public:
  Call(WorkerService* service, RequestMethod<Request, Response> request_method,
       Handler<Request, Response> handler)
      : service_(service), request_method_(request_method), handler_(handler) {}

  grpc::ServerContext& context() { return context_; }
  const Request& request() const { return request_; }
  Request* mutable_request() { return &request_; }
  Response* response() { return &response_; }

  // Asks gRPC for the next call of this kind.
  void Await(grpc::ServerCompletionQueue* queue) {
    (service_->service_.*request_method_)(&context_, &request_, &writer_, queue, queue, this);
  }

  // Sends the answer; from any thread, once.
  void Finish(const grpc::Status& status) {
    answered_ = true;
    if (status.ok()) {
      writer_.Finish(response_, status, this);
    } else {
      writer_.FinishWithError(status, this);
    }
  }

  void Proceed(bool ok) override {
    // Not ok on arrival: the server is shutting down and the call never came.
    if (answered_ || !ok) {
      delete this;
      return;
    }
    service_->Await(request_method_, handler_);  // one call of each kind is always awaited
    if (!service_->Authorised(context_)) {
      Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this worker takes calls from its controller only"));
      return;
    }
    (service_->*handler_)(this);
  }

 private:
  WorkerService* const service_;
  const RequestMethod<Request, Response> request_method_;
  const Handler<Request, Response> handler_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> writer_{&context_};
  bool answered_ = false;
};

WorkerService::~WorkerService() { Stop(); }

bool WorkerService::Authorised(const grpc::ServerContext& context) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthorizationHeader);
  if (it == metadata.end()) return false;
  return TokensMatch(BearerToken(absl::string_view(it->second.data(), it->second.size())),
                     call_token_);
}

void WorkerService::AddTo(grpc::ServerBuilder& builder) {
  builder.RegisterService(&service_);
  queue_ = builder.AddCompletionQueue();
}

template <typename Request, typename Response>
void WorkerService::Await(RequestMethod<Request, Response> request_method,
                          Handler<Request, Response> handler) {
  (new Call<Request, Response>(this, request_method, handler))->Await(queue_.get());
}

void WorkerService::Start() {
  using Service = v1::Worker::AsyncService;
  Await<v1::InferRequest, v1::InferResponse>(&Service::RequestInfer, &WorkerService::Infer);
  Await<v1::LoadRequest, v1::LoadResponse>(&Service::RequestLoad, &WorkerService::Load);
  Await<v1::UnloadRequest, v1::UnloadResponse>(&Service::RequestUnload, &WorkerService::Unload);
  Await<v1::ProfileRequest, v1::ProfileResponse>(&Service::RequestProfile,
                                                 &WorkerService::Profile);
  Await<v1::EvaluateRequest, v1::EvaluateResponse>(&Service::RequestEvaluate,
                                                   &WorkerService::Evaluate);
  Await<v1::RunOnceRequest, v1::RunOnceResponse>(&Service::RequestRunOnce,
                                                 &WorkerService::RunOnce);
  thread_ = std::thread([this] {
    NameThisThread("worker-cq");
    Loop();
  });
}

void WorkerService::Stop() {
  if (stopped_ || queue_ == nullptr) return;
  stopped_ = true;
  queue_->Shutdown();
  if (thread_.joinable()) {
    thread_.join();
  } else {  // never started: drain here
    Loop();
  }
}

void WorkerService::Loop() {
  void* tag = nullptr;
  bool ok = false;
  while (queue_->Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
}

void WorkerService::Infer(Call<v1::InferRequest, v1::InferResponse>* call) {
  v1::InferRequest& request = *call->mutable_request();
  VariantKey key{request.model(), request.variant()};
  std::shared_ptr<Instance> instance = manager_->Find(key);
  if (instance == nullptr) {
    call->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                              absl::StrCat(key.ToString(), " is not loaded on this worker")));
    return;
  }
  const int n = request.queries_size();
  if (n == 0) {
    call->Finish(grpc::Status::OK);
    return;
  }
  // Every answer is written into its place in the response; the last one
  // to arrive sends the call's answer.
  auto* answers = call->response()->mutable_answers();
  answers->Reserve(n);
  for (int i = 0; i < n; ++i) answers->Add();
  auto remaining = std::make_shared<std::atomic<int>>(n);
  const Nanos now = clock_->Now();
  const Nanos call_deadline = DeadlineOnClock(call->context(), *clock_);
  std::vector<InferTask> tasks(n);
  for (int i = 0; i < n; ++i) {
    v1::Query& query = *request.mutable_queries(i);
    InferTask& task = tasks[i];
    task.inputs.reserve(query.inputs_size());
    // The rows move out of the request: it is not read again.
    for (v1::Tensor& t : *query.mutable_inputs()) {
      task.inputs.push_back(rpc::FromProto(std::move(t)));
    }
    task.rows = task.inputs.empty() || task.inputs[0].shape.empty()
                    ? 1
                    : static_cast<int32_t>(task.inputs[0].shape[0]);
    const Nanos deadline =
        query.timeout_us() > 0 ? std::min(call_deadline, now + query.timeout_us() * kMicrosecond)
                               : call_deadline;
    task.deadline = deadline - query.reply_margin_us() * kMicrosecond;
    task.best_effort = query.best_effort();
    task.objective = query.objective_us() > 0
                         ? std::min(task.deadline, now + query.objective_us() * kMicrosecond)
                         : task.deadline;
    task.done = [call, remaining, answer = answers->Mutable(i)](InferResult result) {
      if (result.status.ok()) {
        for (Tensor& t : result.outputs) rpc::ToProto(std::move(t), answer->add_outputs());
      } else {
        answer->set_code(static_cast<int>(result.status.code()));
        answer->set_message(std::string(result.status.message()));
      }
      v1::Timings* timings = answer->mutable_timings();
      timings->set_queue_us(result.queue / kMicrosecond);
      timings->set_compute_us(result.compute / kMicrosecond);
      timings->set_total_us(result.total / kMicrosecond);
      timings->set_batch_size(result.batch_rows);
      // The answers written by other threads are published by this
      // decrement (acq_rel): the thread that reaches zero sees them all.
      if (remaining->fetch_sub(1, std::memory_order_acq_rel) == 1) {
        call->Finish(grpc::Status::OK);
      }
    };
  }
  instance->SubmitAll(std::move(tasks));
}

void WorkerService::Load(Call<v1::LoadRequest, v1::LoadResponse>* call) {
  serving_->Post([this, call] {
    const v1::LoadRequest& request = call->request();
    auto spec = rpc::FromProto(request.variant());
    if (!spec.ok()) {
      call->Finish(rpc::ToGrpc(spec.status()));
      return;
    }
    auto outcome = manager_->Load(*spec, request.replicas(), rpc::FromProto(request.profile()),
                                  request.max_batch());
    if (outcome.ok()) {
      call->response()->set_load_ms(outcome->load_ms);
      call->response()->set_memory_mb(outcome->memory_mb);
    }
    call->Finish(rpc::ToGrpc(outcome.status()));
  });
}

void WorkerService::Unload(Call<v1::UnloadRequest, v1::UnloadResponse>* call) {
  serving_->Post([this, call] {
    const v1::UnloadRequest& request = call->request();
    call->Finish(rpc::ToGrpc(manager_->Unload({request.model(), request.variant()})));
  });
}

void WorkerService::Profile(Call<v1::ProfileRequest, v1::ProfileResponse>* call) {
  background_->Post([this, call] {
    const v1::ProfileRequest& request = call->request();
    auto spec = rpc::FromProto(request.variant());
    if (!spec.ok()) {
      call->Finish(rpc::ToGrpc(spec.status()));
      return;
    }
    ProfileOptions options;
    if (!request.batch_sizes().empty()) {
      options.batch_sizes.assign(request.batch_sizes().begin(), request.batch_sizes().end());
    }
    if (request.latency_ceiling_ms() > 0) options.latency_ceiling_ms = request.latency_ceiling_ms();
    if (request.warmup() > 0) options.warmup = request.warmup();
    if (request.repetitions() > 0) options.repetitions = request.repetitions();
    if (request.rounds() > 0) options.rounds = request.rounds();
    for (const v1::Tensor& t : request.sample()) options.sample.push_back(rpc::FromProto(t));
    absl::StatusOr<::maitre::Profile> profile;
    registration_cpu_.Run([&] { profile = manager_->ProfileVariant(*spec, options); });
    if (profile.ok()) {
      v1::ProfileResponse* response = call->response();
      response->set_load_ms(profile->load_ms());
      response->set_memory_mb(profile->memory_mb());
      rpc::ToProto(profile->points(), response->mutable_latencies());
    }
    call->Finish(rpc::ToGrpc(profile.status()));
  });
}

void WorkerService::Evaluate(Call<v1::EvaluateRequest, v1::EvaluateResponse>* call) {
  background_->Post([this, call] {
    const v1::EvaluateRequest& request = call->request();
    auto spec = rpc::FromProto(request.variant());
    if (!spec.ok()) {
      call->Finish(rpc::ToGrpc(spec.status()));
      return;
    }
    absl::StatusOr<runtime::Accuracy> accuracy;
    registration_cpu_.Run([&] {
      accuracy = manager_->Evaluate(*spec, request.valset_blob(), request.batch_size());
    });
    if (accuracy.ok()) {
      call->response()->set_accuracy(accuracy->top1);
      call->response()->set_examples(accuracy->examples);
    }
    call->Finish(rpc::ToGrpc(accuracy.status()));
  });
}

// Registration work like Evaluate: it loads the variant afresh and counts
// against the registration CPU share.
void WorkerService::RunOnce(Call<v1::RunOnceRequest, v1::RunOnceResponse>* call) {
  background_->Post([this, call] {
    const v1::RunOnceRequest& request = call->request();
    auto spec = rpc::FromProto(request.variant());
    if (!spec.ok()) {
      call->Finish(rpc::ToGrpc(spec.status()));
      return;
    }
    std::vector<Tensor> inputs;
    for (const v1::Tensor& t : request.inputs()) inputs.push_back(rpc::FromProto(t));
    absl::StatusOr<std::vector<Tensor>> outputs;
    registration_cpu_.Run([&] { outputs = manager_->RunOnce(*spec, inputs); });
    if (outputs.ok()) {
      for (Tensor& t : *outputs) rpc::ToProto(std::move(t), call->response()->add_outputs());
    }
    call->Finish(rpc::ToGrpc(outputs.status()));
  });
}

}  // namespace maitre::worker
