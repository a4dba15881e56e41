// The gRPC implementation of WorkerApi. The data path uses the callback
// client API, so no controller thread waits on a worker, and groups the
// queries that wait for an instance's earlier calls into one call
// (call_coalescer.h).
#include <chrono>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "controller/dataplane/call_coalescer.h"
#include "controller/dataplane/worker_api.h"
#include "core/clock.h"
#include "maitre/worker.grpc.pb.h"
#include "core/secret_token.h"
#include "rpc/convert.h"

namespace maitre::controller {
namespace {

namespace v1 = ::maitre::worker::v1;

// Control calls carry generous deadlines: a load or a profile of a large
// model on a busy worker takes seconds, and evaluating 10k images longer.
constexpr Nanos kLoadTimeout = 120 * kSecond;
constexpr Nanos kProfileTimeout = 600 * kSecond;

// The data path of one worker: its call slots and the queries waiting for
// them. Shared with the calls in flight, which may return after the
// WorkerApi that started them is gone (the worker left the cluster).
class InferChannel : public std::enable_shared_from_this<InferChannel> {
 public:
  InferChannel(std::shared_ptr<v1::Worker::Stub> stub, std::string authorization,
               WorkerCallObserver on_call)
      : stub_(stub), authorization_(std::move(authorization)), on_call_(std::move(on_call)) {}

  void Infer(const VariantKey& key, OutgoingQuery query) {
    std::vector<OutgoingQuery> send = coalescer_.Offer(key, std::move(query));
    if (!send.empty()) Call(key, std::move(send));
  }

  const Clock* clock() const { return clock_; }

 private:
  // Sends `queries` in one call; when it returns, the queries that waited
  // for it leave in the next call before these are answered.
  void Call(const VariantKey& key, std::vector<OutgoingQuery> queries) {
    struct InFlight {
      grpc::ClientContext context;
      v1::InferRequest request;
      v1::InferResponse response;
      std::vector<OutgoingQuery> queries;
      Nanos sent = 0;
    };
    if (on_call_) on_call_(static_cast<int>(queries.size()));
    auto* call = new InFlight;
    call->request.set_model(key.model);
    call->request.set_variant(key.variant);
    const Nanos now = clock_->Now();
    Nanos latest = now + kMillisecond;
    for (const OutgoingQuery& q : queries) {
      v1::Query* out = call->request.add_queries();
      for (const Tensor& t : *q.inputs) rpc::ToProto(Tensor(t), out->add_inputs());
      out->set_best_effort(q.options.best_effort);
      out->set_timeout_us(std::max<Nanos>(q.deadline - now, kMicrosecond) / kMicrosecond);
      out->set_reply_margin_us(q.options.reply_margin / kMicrosecond);
      // The objective counts from the query's offer; the time it waited
      // here is gone from it.
      out->set_objective_us(
          q.options.objective > 0
              ? std::max<Nanos>(q.options.objective - (now - q.offered), kMicrosecond) /
                    kMicrosecond
              : 0);
      latest = std::max(latest, q.deadline);
    }
    call->queries = std::move(queries);
    call->sent = now;
    call->context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::nanoseconds(latest - now));
    call->context.AddMetadata(kAuthorizationHeader, authorization_);
    stub_->async()->Infer(
        &call->context, &call->request, &call->response,
        [self = shared_from_this(), key, call](grpc::Status status) {
          std::unique_ptr<InFlight> owned(call);
          CallCoalescer::Next next = self->coalescer_.CallReturned(key, self->clock_->Now());
          if (!next.send.empty()) self->Call(key, std::move(next.send));
          for (OutgoingQuery& q : next.expired) {
            std::move(q.done)(absl::DeadlineExceededError(
                "the query's deadline passed while it waited for a call to its worker"));
          }
          Answer(status, owned->response, owned->queries, owned->sent);
        });
  }

  // Hands each query its answer from the call's response.
  static void Answer(const grpc::Status& status, v1::InferResponse& response,
                     std::vector<OutgoingQuery>& queries, Nanos sent) {
    if (status.ok() && response.answers_size() != static_cast<int>(queries.size())) {
      for (OutgoingQuery& q : queries) {
        std::move(q.done)(absl::InternalError(absl::StrCat(
            "the worker answered ", response.answers_size(), " of ", queries.size(),
            " queries")));
      }
      return;
    }
    for (size_t i = 0; i < queries.size(); ++i) {
      if (!status.ok()) {
        std::move(queries[i].done)(rpc::FromGrpc(status));
        continue;
      }
      v1::Answer& answer = *response.mutable_answers(static_cast<int>(i));
      if (answer.code() != 0) {
        std::move(queries[i].done)(
            absl::Status(static_cast<absl::StatusCode>(answer.code()), answer.message()));
        continue;
      }
      WorkerReply reply;
      reply.outputs.reserve(answer.outputs_size());
      for (v1::Tensor& t : *answer.mutable_outputs()) {
        reply.outputs.push_back(rpc::FromProto(std::move(t)));
      }
      const v1::Timings& timings = answer.timings();
      reply.queue_us = timings.queue_us();
      reply.compute_us = timings.compute_us();
      reply.total_us = timings.total_us();
      reply.batch_size = timings.batch_size();
      reply.held = sent - queries[i].offered;
      std::move(queries[i].done)(std::move(reply));
    }
  }

  const std::shared_ptr<v1::Worker::Stub> stub_;
  const std::string authorization_;
  const WorkerCallObserver on_call_;
  const Clock* const clock_ = SteadyClock::Get();
  CallCoalescer coalescer_{CallCoalescer::Options{}};
};

class GrpcWorkerApi final : public WorkerApi {
 public:
  GrpcWorkerApi(const std::string& address, const std::string& call_token,
                WorkerCallObserver on_call)
      : address_(address), authorization_(BearerValue(call_token)) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    stub_ = v1::Worker::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
    infer_ = std::make_shared<InferChannel>(stub_, authorization_, std::move(on_call));
  }

  void Infer(const VariantKey& key, std::shared_ptr<const std::vector<Tensor>> inputs,
             const InferOptions& options, WorkerReplyCallback done) override {
    const Nanos now = infer_->clock()->Now();
    infer_->Infer(key, OutgoingQuery{std::move(inputs), options, now, now + options.timeout,
                                     std::move(done)});
  }

  absl::StatusOr<LoadResult> Load(const VariantSpec& spec, int replicas,
                                  const std::vector<LatencyPoint>& profile,
                                  int32_t max_batch) override {
    v1::LoadRequest request;
    rpc::ToProto(spec, request.mutable_variant());
    request.set_replicas(replicas);
    request.set_max_batch(max_batch);
    rpc::ToProto(profile, request.mutable_profile());
    v1::LoadResponse response;
    grpc::ClientContext context;
    Prepare(&context, kLoadTimeout);
    absl::Status status = rpc::FromGrpc(stub_->Load(&context, request, &response));
    if (!status.ok()) return status;
    return LoadResult{response.load_ms(), response.memory_mb()};
  }

  absl::Status Unload(const VariantKey& key) override {
    v1::UnloadRequest request;
    request.set_model(key.model);
    request.set_variant(key.variant);
    v1::UnloadResponse response;
    grpc::ClientContext context;
    Prepare(&context, kLoadTimeout);
    return rpc::FromGrpc(stub_->Unload(&context, request, &response));
  }

  absl::StatusOr<Profile> ProfileVariant(const VariantSpec& spec,
                                         const ProfileRequest& profile_request) override {
    v1::ProfileRequest request;
    rpc::ToProto(spec, request.mutable_variant());
    request.mutable_batch_sizes()->Assign(profile_request.batch_sizes.begin(),
                                          profile_request.batch_sizes.end());
    request.set_latency_ceiling_ms(profile_request.latency_ceiling_ms);
    request.set_warmup(profile_request.warmup);
    request.set_repetitions(profile_request.repetitions);
    request.set_rounds(profile_request.rounds);
    for (Tensor t : profile_request.sample) rpc::ToProto(std::move(t), request.add_sample());
    v1::ProfileResponse response;
    grpc::ClientContext context;
    Prepare(&context, kProfileTimeout);
    absl::Status status = rpc::FromGrpc(stub_->Profile(&context, request, &response));
    if (!status.ok()) return status;
    return Profile::Create(rpc::FromProto(response.latencies()), response.load_ms(),
                           response.memory_mb());
  }

  absl::StatusOr<Evaluation> Evaluate(const VariantSpec& spec, const std::string& valset_blob,
                                      int batch_size) override {
    v1::EvaluateRequest request;
    rpc::ToProto(spec, request.mutable_variant());
    request.set_valset_blob(valset_blob);
    request.set_batch_size(batch_size);
    v1::EvaluateResponse response;
    grpc::ClientContext context;
    Prepare(&context, kProfileTimeout);
    absl::Status status = rpc::FromGrpc(stub_->Evaluate(&context, request, &response));
    if (!status.ok()) return status;
    return Evaluation{response.accuracy(), response.examples()};
  }

  absl::StatusOr<std::vector<Tensor>> RunOnce(const VariantSpec& spec,
                                              const std::vector<Tensor>& inputs) override {
    v1::RunOnceRequest request;
    rpc::ToProto(spec, request.mutable_variant());
    for (Tensor t : inputs) rpc::ToProto(std::move(t), request.add_inputs());
    v1::RunOnceResponse response;
    grpc::ClientContext context;
    Prepare(&context, kProfileTimeout);
    absl::Status status = rpc::FromGrpc(stub_->RunOnce(&context, request, &response));
    if (!status.ok()) return status;
    std::vector<Tensor> outputs;
    for (v1::Tensor& t : *response.mutable_outputs()) {
      outputs.push_back(rpc::FromProto(std::move(t)));
    }
    return outputs;
  }

 private:
  // Every call has a deadline and carries the token the worker accepts its
  // controller's calls with.
  void Prepare(grpc::ClientContext* context, Nanos timeout) const {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::nanoseconds(timeout));
    context->AddMetadata(kAuthorizationHeader, authorization_);
  }

  const std::string address_;
  const std::string authorization_;
  std::shared_ptr<v1::Worker::Stub> stub_;
  std::shared_ptr<InferChannel> infer_;
};

}  // namespace

std::unique_ptr<WorkerApi> NewGrpcWorkerApi(const std::string& address,
                                            const std::string& call_token,
                                            WorkerCallObserver on_call) {
  return std::make_unique<GrpcWorkerApi>(address, call_token, std::move(on_call));
}

}  // namespace maitre::controller
