// The gRPC implementation of WorkerApi. The data path uses the callback
// client API, so no controller thread waits on a worker.
#include <chrono>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "controller/dataplane/worker_api.h"
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

class GrpcWorkerApi final : public WorkerApi {
 public:
  GrpcWorkerApi(const std::string& address, const std::string& call_token)
      : address_(address), authorization_(BearerValue(call_token)) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    stub_ = v1::Worker::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }

  void Infer(const VariantKey& key, std::shared_ptr<const std::vector<Tensor>> inputs,
             const InferOptions& options, WorkerReplyCallback done) override {
    // The call's state lives until gRPC reports completion.
    struct Call {
      grpc::ClientContext context;
      v1::InferRequest request;
      v1::InferResponse response;
      WorkerReplyCallback done;
    };
    auto* call = new Call;
    call->done = std::move(done);
    call->request.set_model(key.model);
    call->request.set_variant(key.variant);
    call->request.set_best_effort(options.best_effort);
    call->request.set_reply_margin_us(options.reply_margin / kMicrosecond);
    call->request.set_objective_us(std::max<Nanos>(options.objective, 0) / kMicrosecond);
    for (const Tensor& t : *inputs) rpc::ToProto(Tensor(t), call->request.add_inputs());
    Prepare(&call->context, std::max<Nanos>(options.timeout, kMillisecond));
    stub_->async()->Infer(&call->context, &call->request, &call->response,
                          [call](grpc::Status status) {
                            std::unique_ptr<Call> owned(call);
                            if (!status.ok()) {
                              std::move(owned->done)(rpc::FromGrpc(status));
                              return;
                            }
                            WorkerReply reply;
                            reply.outputs.reserve(owned->response.outputs_size());
                            for (v1::Tensor& t : *owned->response.mutable_outputs()) {
                              reply.outputs.push_back(rpc::FromProto(std::move(t)));
                            }
                            const v1::Timings& timings = owned->response.timings();
                            reply.queue_us = timings.queue_us();
                            reply.compute_us = timings.compute_us();
                            reply.total_us = timings.total_us();
                            reply.batch_size = timings.batch_size();
                            std::move(owned->done)(std::move(reply));
                          });
  }

  absl::StatusOr<LoadResult> Load(const VariantSpec& spec, int replicas,
                                  const std::vector<LatencyPoint>& profile) override {
    v1::LoadRequest request;
    rpc::ToProto(spec, request.mutable_variant());
    request.set_replicas(replicas);
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
  std::unique_ptr<v1::Worker::Stub> stub_;
};

}  // namespace

std::unique_ptr<WorkerApi> NewGrpcWorkerApi(const std::string& address,
                                            const std::string& call_token) {
  return std::make_unique<GrpcWorkerApi>(address, call_token);
}

}  // namespace maitre::controller
