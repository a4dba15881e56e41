#include "controller/frontend/grpc_frontend.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/frontend/grpc_codec.h"
#include "controller/frontend/model_views.h"
#include "controller/pipelines/pipeline_run.h"
#include "core/secret_token.h"
#include "core/status_macros.h"
#include "rpc/convert.h"

namespace maitre::controller {

absl::Status GrpcFrontend::Admit(const grpc::CallbackServerContext& context,
                                 const std::string& app, const std::string& model) const {
  const auto& metadata = context.client_metadata();
  auto credential = metadata.find(kAuthorizationHeader);
  absl::StatusOr<Principal> caller = o_.keys->Authenticate(
      credential == metadata.end()
          ? absl::string_view()
          : absl::string_view(credential->second.data(), credential->second.size()));
  if (!caller.ok()) return caller.status();
  if (!app.empty()) MAITRE_RETURN_IF_ERROR(CheckAppAccess(*caller, app));
  if (model.empty()) return absl::OkStatus();
  // An unknown model is answered NOT_FOUND by the call itself.
  const CatalogModel* found = o_.catalog->Get()->FindModel(ParseModelRef(model, "").model);
  if (found != nullptr) return CheckAppAccess(*caller, found->app);
  if (auto pipeline = o_.pipelines ? o_.pipelines->Find(model) : nullptr) {
    return CheckAppAccess(*caller, pipeline->app);
  }
  return absl::OkStatus();
}

std::shared_ptr<const ServedPipeline> GrpcFrontend::PipelineNamed(
    const std::string& name, const std::string& version) const {
  if (o_.pipelines == nullptr || !version.empty()) return nullptr;
  return o_.pipelines->Find(name);
}

grpc::ServerUnaryReactor* GrpcFrontend::ServerLive(grpc::CallbackServerContext* context,
                                                   const inference::ServerLiveRequest*,
                                                   inference::ServerLiveResponse* response) {
  response->set_live(true);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GrpcFrontend::ServerReady(grpc::CallbackServerContext* context,
                                                    const inference::ServerReadyRequest*,
                                                    inference::ServerReadyResponse* response) {
  bool draining = false;
  {
    absl::MutexLock lock(&mu_);
    draining = draining_;
  }
  response->set_ready(!draining && o_.cluster->worker_count() > 0);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GrpcFrontend::ModelReady(grpc::CallbackServerContext* context,
                                                   const inference::ModelReadyRequest* request,
                                                   inference::ModelReadyResponse* response) {
  auto* reactor = context->DefaultReactor();
  if (absl::Status admitted = Admit(*context, "", request->name()); !admitted.ok()) {
    reactor->Finish(rpc::ToGrpc(admitted));
    return reactor;
  }
  std::shared_ptr<const ServedPipeline> pipeline = PipelineNamed(request->name(), request->version());
  auto readiness =
      pipeline != nullptr
          ? PipelineReadiness(*o_.catalog->Get(), *o_.cluster, *pipeline)
          : ModelReadiness(*o_.catalog->Get(), *o_.cluster,
                           ParseModelRef(request->name(), request->version()));
  if (readiness.ok()) response->set_ready(readiness->ready);
  reactor->Finish(rpc::ToGrpc(readiness.status()));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcFrontend::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  response->set_name("maitre");
  response->set_version(o_.version);
  for (const char* e : {"binary_tensor_data", "model_less_apps", "variants", "registration",
                        "repository_index", "offline_jobs"}) {
    response->add_extensions(e);
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GrpcFrontend::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  auto* reactor = context->DefaultReactor();
  if (absl::Status admitted = Admit(*context, "", request->name()); !admitted.ok()) {
    reactor->Finish(rpc::ToGrpc(admitted));
    return reactor;
  }
  std::shared_ptr<const ServedPipeline> pipeline = PipelineNamed(request->name(), request->version());
  auto m = pipeline != nullptr
               ? DescribePipeline(*pipeline)
               : DescribeModel(*o_.catalog->Get(),
                               ParseModelRef(request->name(), request->version()));
  if (m.ok()) {
    response->set_name(m->name);
    for (const std::string& v : m->versions) response->add_versions(v);
    response->set_platform(m->platform);
    for (const auto& [specs, out] : {std::pair{&m->inputs, response->mutable_inputs()},
                                     {&m->outputs, response->mutable_outputs()}}) {
      for (const TensorSpec& spec : *specs) {
        auto* t = out->Add();
        t->set_name(spec.name);
        t->set_datatype(std::string(DataTypeName(spec.dtype)));
        t->mutable_shape()->Assign(spec.shape.begin(), spec.shape.end());
      }
    }
  }
  reactor->Finish(rpc::ToGrpc(m.status()));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcFrontend::ModelInfer(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request_bytes,
                                                   grpc::ByteBuffer* response_bytes) {
  // The callback API runs this once the call's request has arrived: the
  // call's start, from which its deadline counts.
  const Nanos received = o_.clock->Now();
  auto* reactor = context->DefaultReactor();
  // Under overload a call can wait inside gRPC, before this handler runs,
  // for longer than its client waits. Decoding and computing it then would
  // spend the server on answers nobody reads, while fresh calls queue
  // behind them (measured: docs/experiments.md, "Overload"). gRPC's
  // deadline counts from when it read the call, so it shows that wait.
  const std::optional<Nanos> client_deadline =
      ClientDeadline(context->deadline(), std::chrono::system_clock::now(), received);
  const bool cancelled = context->IsCancelled();
  if ((client_deadline && *client_deadline <= received) || cancelled) {
    absl::Status stale =
        cancelled
            ? absl::CancelledError(
                  "the client cancelled the call before it could be read; nothing was computed "
                  "for it")
            : absl::DeadlineExceededError(
                  "the client's deadline passed while the call waited in the server's gRPC "
                  "queues, before it could be read; nothing was computed for it");
    o_.metrics->RecordQuery("", "", stale, nullptr);
    reactor->Finish(rpc::ToGrpc(stale));
    return reactor;
  }
  InFlightLimit::Permit permit;
  if (o_.in_flight != nullptr) {
    permit = o_.in_flight->TryAcquire();
    if (!permit.held()) {
      absl::Status refused = absl::ResourceExhaustedError(o_.in_flight->RefusalMessage());
      o_.metrics->RecordQuery("", "", refused, nullptr);
      reactor->Finish(rpc::ToGrpc(refused));
      return reactor;
    }
  }
  inference::ModelInferRequest request;
  grpc::ByteBuffer copy(*request_bytes);  // shares the slices; Deserialize consumes it
  if (!grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(&copy, &request)
           .ok()) {
    absl::Status malformed =
        absl::InvalidArgumentError("the request is not a valid inference.ModelInferRequest");
    o_.metrics->RecordQuery("", "", malformed, nullptr);
    reactor->Finish(rpc::ToGrpc(malformed));
    return reactor;
  }
  auto parsed = FromModelInferRequest(request);
  if (!parsed.ok()) {
    o_.metrics->RecordQuery("", "", parsed.status(), nullptr);
    reactor->Finish(rpc::ToGrpc(parsed.status()));
    return reactor;
  }
  parsed->client_deadline = client_deadline;
  if (absl::Status admitted = Admit(*context, parsed->app, request.model_name());
      !admitted.ok()) {
    o_.metrics->RecordQuery("", "", admitted, nullptr);
    reactor->Finish(rpc::ToGrpc(admitted));
    return reactor;
  }
  bool draining = false;
  {
    absl::MutexLock lock(&mu_);
    draining = draining_;
    if (!draining) ++in_flight_;
  }
  if (draining) {
    absl::Status refused = absl::UnavailableError(
        "the server is shutting down and takes no new requests; send this one to another server");
    o_.metrics->RecordQuery("", "", refused, nullptr);
    reactor->Finish(rpc::ToGrpc(refused));
    return reactor;
  }
  std::shared_ptr<const ServedPipeline> pipeline =
      PipelineNamed(request.model_name(), request.model_version());
  if (pipeline != nullptr) {
    InferPipeline(std::move(pipeline), *std::move(parsed), received, reactor, response_bytes,
                  std::move(permit));
    return reactor;
  }
  InferTarget target;
  target.app = parsed->app;
  if (target.app.empty() || !request.model_name().empty()) {
    ModelRef ref = ParseModelRef(request.model_name(), request.model_version());
    target.model = ref.model;
    target.variant = ref.variant;
  }
  o_.dispatcher->Infer(
      std::move(target), *std::move(parsed), received,
      [this, reactor, response_bytes,
       permit = std::move(permit)](absl::StatusOr<InferResponse> result) mutable {
        if (!result.ok()) {
          Reply(reactor, response_bytes, std::move(permit), result.status());
          return;
        }
        inference::ModelInferResponse response;
        ToModelInferResponse(*std::move(result), &response);
        Reply(reactor, response_bytes, std::move(permit), std::move(response));
      });
  return reactor;
}

// The pipeline's answer, its parameters naming the stages that ran
// ("stages": "fast,slow") and, per stage, "<vertex>.rows",
// "<vertex>.started_us", "<vertex>.finished_us", "<vertex>.queue_us",
// "<vertex>.compute_us" and "<vertex>.variant"; "skipped" names the rest.
void GrpcFrontend::InferPipeline(std::shared_ptr<const ServedPipeline> pipeline,
                                 InferRequest request, Nanos received,
                                 grpc::ServerUnaryReactor* reactor,
                                 grpc::ByteBuffer* response_bytes,
                                 InFlightLimit::Permit permit) {
  if (pipeline->validated == nullptr) {
    Reply(reactor, response_bytes, std::move(permit),
          absl::FailedPreconditionError(absl::StrCat("pipeline '", pipeline->name,
                                                     "' no longer validates (", pipeline->error,
                                                     "); register it again")));
    return;
  }
  // The tuner's envelopes are drawn on these (docs/policies.md).
  if (pipeline->arrivals != nullptr) pipeline->arrivals->Record(received);
  Dispatcher* dispatcher = o_.dispatcher;
  RunPipeline(
      pipeline->validated, std::move(request), received, o_.clock,
      [dispatcher, pipeline](InferTarget target, InferRequest stage, Nanos at, InferDone done) {
        target.variant = PlannedVariant(*pipeline, target.model);
        dispatcher->Infer(std::move(target), std::move(stage), at, std::move(done));
      },
      [this, reactor, response_bytes, permit = std::move(permit), received,
       name = pipeline->name,
       stage_rows = pipeline->stage_rows](absl::StatusOr<PipelineAnswer> answer) mutable {
        if (o_.metrics != nullptr) {
          o_.metrics->RecordPipelineQuery(name, answer.status(), o_.clock->Now() - received);
        }
        if (!answer.ok()) {
          Reply(reactor, response_bytes, std::move(permit), answer.status());
          return;
        }
        stage_rows->Record(*answer);
        inference::ModelInferResponse response;
        ToModelInferResponse(std::move(answer->response), &response);
        auto& params = *response.mutable_parameters();
        params.erase("worker");
        params.erase("worker_type");
        params.erase("queue_us");
        params.erase("compute_us");
        std::vector<std::string> ran;
        for (const StageRun& s : answer->stages) {
          ran.push_back(s.vertex);
          params[s.vertex + ".variant"].set_string_param(s.variant);
          params[s.vertex + ".rows"].set_int64_param(s.rows);
          params[s.vertex + ".started_us"].set_int64_param(s.started_us);
          params[s.vertex + ".finished_us"].set_int64_param(s.finished_us);
          params[s.vertex + ".queue_us"].set_int64_param(s.queue_us);
          params[s.vertex + ".compute_us"].set_int64_param(s.compute_us);
        }
        params["pipeline"].set_string_param(response.model_name());
        params["stages"].set_string_param(absl::StrJoin(ran, ","));
        params["skipped"].set_string_param(absl::StrJoin(answer->skipped, ","));
        Reply(reactor, response_bytes, std::move(permit), std::move(response));
      });
}

void GrpcFrontend::Reply(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* response_bytes,
                         InFlightLimit::Permit permit,
                         absl::StatusOr<inference::ModelInferResponse> response) {
  if (!response.ok()) {
    reactor->Finish(rpc::ToGrpc(response.status()));
  } else {
    bool own = false;
    reactor->Finish(grpc::SerializationTraits<inference::ModelInferResponse>::Serialize(
        *response, response_bytes, &own));
  }
  // Finished calls are still sent when the gRPC server shuts down, so
  // the drain need not wait for the bytes.
  permit.Release();
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

void GrpcFrontend::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

int GrpcFrontend::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace maitre::controller
