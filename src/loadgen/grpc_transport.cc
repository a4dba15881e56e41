// The gRPC transport: ModelInfer through the callback stub, so no thread
// waits per request and many calls share each HTTP/2 channel.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/secret_token.h"
#include "inference.grpc.pb.h"
#include "loadgen/transport.h"

namespace maitre::loadgen {
namespace {

int64_t IntegerParameter(const google::protobuf::Map<std::string, inference::InferParameter>& map,
                         const std::string& key) {
  auto it = map.find(key);
  if (it == map.end()) return -1;
  const inference::InferParameter& p = it->second;
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      return p.int64_param();
    case inference::InferParameter::kUint64Param:
      return static_cast<int64_t>(p.uint64_param());
    case inference::InferParameter::kDoubleParam:
      return static_cast<int64_t>(p.double_param());
    default:
      return -1;
  }
}

void SetDouble(google::protobuf::Map<std::string, inference::InferParameter>* map,
               const std::string& key, const std::optional<double>& value) {
  if (value) (*map)[key].set_double_param(*value);
}

class GrpcTransport final : public Transport {
 public:
  GrpcTransport(const GrpcTransportOptions& options,
                const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                std::vector<inference::ModelInferRequest> requests, std::string authorization)
      : timeout_(options.timeout),
        authorization_(std::move(authorization)),
        clock_(options.clock ? options.clock : SteadyClock::Get()),
        requests_(std::move(requests)) {
    for (const auto& channel : channels) {
      stubs_.push_back(inference::GRPCInferenceService::NewStub(channel));
    }
  }

  ~GrpcTransport() override { Shutdown(); }

  size_t num_payloads() const override { return requests_.size(); }

  void Start(size_t index, CallCallback done) override {
    auto* call = new Call;
    call->done = std::move(done);
    call->context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::nanoseconds(timeout_));
    if (!authorization_.empty()) call->context.AddMetadata(kAuthorizationHeader, authorization_);
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_) {
        delete call;
        return;
      }
      in_flight_.insert(call);
    }
    call->sent_at = clock_->Now();
    const size_t turn = next_stub_.fetch_add(1, std::memory_order_relaxed);
    inference::GRPCInferenceService::Stub& stub = *stubs_[turn % stubs_.size()];
    stub.async()->ModelInfer(&call->context, &requests_[index % requests_.size()],
                             &call->response,
                             [this, call](grpc::Status status) { Finish(call, status); });
  }

  void Shutdown() override {
    std::vector<Call*> to_cancel;
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_ && in_flight_.empty()) return;
      shut_down_ = true;
      to_cancel.assign(in_flight_.begin(), in_flight_.end());
    }
    // Cancelled outside the lock: gRPC may run a call's callback inline in
    // TryCancel(), and the callback takes mu_. Calls stay allocated until
    // below, since Finish() parks them instead of deleting once shut down.
    for (Call* call : to_cancel) call->context.TryCancel();
    absl::MutexLock lock(&mu_);
    // Wait until every callback has run (and released `this`).
    mu_.Await(absl::Condition(
        +[](absl::flat_hash_set<Call*>* s) { return s->empty(); }, &in_flight_));
    for (Call* call : finished_) delete call;
    finished_.clear();
  }

  int64_t connections_opened() const override { return static_cast<int64_t>(stubs_.size()); }

 private:
  struct Call {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    CallCallback done;
    Nanos sent_at = 0;
  };

  void Finish(Call* call, const grpc::Status& status) {
    CallResult r;
    r.done_at = clock_->Now();
    r.sent_at = call->sent_at;
    if (status.ok()) {
      r.ok = true;
      const auto& parameters = call->response.parameters();
      r.server.queue_us = IntegerParameter(parameters, "queue_us");
      r.server.compute_us = IntegerParameter(parameters, "compute_us");
      r.server.total_us = IntegerParameter(parameters, "total_us");
      r.server.batch_rows = IntegerParameter(parameters, "batch_size");
      r.server.variant =
          VariantOf(call->response.model_name(), call->response.model_version());
    } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
               r.done_at - r.sent_at >= timeout_) {
      r.error_kind = "timeout";
      r.error_message = absl::StrCat("no answer within ", ToSeconds(timeout_), " s");
    } else {
      // gRPC and absl number their codes alike.
      r.error_kind = absl::StrCat(
          "grpc ", absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())));
      r.error_message = status.error_message();
    }
    bool deliver;
    {
      absl::MutexLock lock(&mu_);
      deliver = !shut_down_;
    }
    if (deliver) call->done(std::move(r));
    // Leaving in_flight_ only now lets Shutdown() wait for this callback.
    absl::MutexLock lock(&mu_);
    in_flight_.erase(call);
    if (shut_down_) {
      finished_.push_back(call);
    } else {
      delete call;
    }
  }

  const Nanos timeout_;
  const std::string authorization_;  // "" or "Bearer <key>"
  const Clock* clock_;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs_;
  std::atomic<size_t> next_stub_{0};
  const std::vector<inference::ModelInferRequest> requests_;

  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<Call*> in_flight_ ABSL_GUARDED_BY(mu_);
  std::vector<Call*> finished_ ABSL_GUARDED_BY(mu_);  // done after Shutdown() began
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> CreateGrpcTransport(
    const GrpcTransportOptions& options, const Target& target,
    const std::vector<std::vector<Tensor>>& rows) {
  if (target.model.empty() == target.app.empty()) {
    return absl::InvalidArgumentError("name exactly one of a model and an app");
  }
  if (rows.empty()) return absl::InvalidArgumentError("no input rows to send");
  if (options.address.empty()) return absl::InvalidArgumentError("no gRPC address given");
  if (options.channels < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("gRPC channels must be at least 1, not ", options.channels));
  }
  std::vector<inference::ModelInferRequest> requests;
  requests.reserve(rows.size());
  for (const std::vector<Tensor>& row : rows) {
    inference::ModelInferRequest request;
    if (!target.app.empty()) {
      // No model_name: the server then picks the model as well as the
      // variant (a model_name would pin one model of the app).
      (*request.mutable_parameters())["maitre_app"].set_string_param(target.app);
    } else {
      request.set_model_name(target.model);
    }
    SetDouble(request.mutable_parameters(), "latency_ms", target.latency_ms);
    SetDouble(request.mutable_parameters(), "min_accuracy", target.min_accuracy);
    SetDouble(request.mutable_parameters(), "max_cost", target.max_cost);
    for (const Tensor& t : row) {
      if (absl::Status s = t.Validate(); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': ", s.message()));
      }
      auto* input = request.add_inputs();
      input->set_name(t.name);
      input->set_datatype(std::string(DataTypeName(t.dtype)));
      for (int64_t d : t.shape) input->add_shape(d);
      request.add_raw_input_contents(t.data);
    }
    requests.push_back(std::move(request));
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Channels with equal arguments would share one connection through gRPC's
  // global subchannel pool; a pool per channel gives each its own.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < options.channels; ++i) {
    channels.push_back(
        grpc::CreateCustomChannel(options.address, grpc::InsecureChannelCredentials(), args));
    if (options.connect_timeout > 0 &&
        !channels.back()->WaitForConnected(std::chrono::system_clock::now() +
                                           std::chrono::nanoseconds(options.connect_timeout))) {
      return absl::UnavailableError(absl::StrCat("cannot connect to the gRPC server at ",
                                                 options.address, " within ",
                                                 ToSeconds(options.connect_timeout), " s"));
    }
  }
  return std::unique_ptr<Transport>(
      new GrpcTransport(options, channels, std::move(requests),
                        target.api_key.empty() ? "" : BearerValue(target.api_key)));
}

}  // namespace maitre::loadgen
