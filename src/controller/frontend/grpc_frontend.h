// The public gRPC front-end: inference.GRPCInferenceService, written from
// the Open Inference Protocol so standard clients work unchanged. It uses
// gRPC's callback API: ModelInfer hands the query to the dispatcher and
// finishes when the answer comes back, holding no thread meanwhile.
// ModelInfer takes its request as raw bytes and parses them itself, so that
// a malformed protobuf is answered INVALID_ARGUMENT with a message (gRPC's
// own deserializer would answer a bare status). Every call takes a permit
// of the controller's InFlightLimit before its request is decoded and holds
// it until answered; without one it is refused RESOURCE_EXHAUSTED at once,
// so the calls the callback API accepts cannot pile up. While the
// controller drains (BeginDrain) new inferences are answered UNAVAILABLE and those in flight
// finish.
//
// Thread-safety: thread-safe.
#pragma once

#include <string>

#include "absl/synchronization/mutex.h"
#include "controller/access/key_ring.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"
#include "controller/dataplane/dispatcher.h"
#include "controller/pipelines/pipeline_book.h"
#include "controller/dataplane/in_flight_limit.h"
#include "controller/serving_metrics.h"
#include "inference.grpc.pb.h"

namespace maitre::controller {

class GrpcFrontend final
    : public inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
          inference::GRPCInferenceService::CallbackService> {
 public:
  struct Options {
    Catalog* catalog = nullptr;
    Cluster* cluster = nullptr;
    Dispatcher* dispatcher = nullptr;
    ServingMetrics* metrics = nullptr;
    // Who may call (docs/operations.md, "API keys"): the server-wide calls
    // are open, model calls need a key reaching the model's app.
    const KeyRing* keys = nullptr;
    // Bounds the queries in flight (may be null: no bound).
    InFlightLimit* in_flight = nullptr;
    // ModelInfer reaches a pipeline by name as it does a model
    // (docs/pipelines.md, "Serving a pipeline"); may be null.
    PipelineBook* pipelines = nullptr;
    const Clock* clock = SteadyClock::Get();
    std::string version;
  };
  explicit GrpcFrontend(Options options) : o_(options) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

  // From now on ModelInfer answers UNAVAILABLE and ServerReady says not
  // ready; inferences already received go on. Idempotent.
  void BeginDrain();
  // ModelInfer calls handed to the dispatcher and not yet answered.
  int in_flight() const;

 private:
  // OK when the call's key may reach `app` and `model`'s app (either may
  // be empty); else UNAUTHENTICATED or PERMISSION_DENIED.
  absl::Status Admit(const grpc::CallbackServerContext& context, const std::string& app,
                     const std::string& model) const;
  // The pipeline a call names, as the Open Inference Protocol reaches one
  // (by its name, with no version); null for none.
  std::shared_ptr<const ServedPipeline> PipelineNamed(const std::string& name,
                                                      const std::string& version) const;
  // ModelInfer for a pipeline: its stages through the dispatcher.
  void InferPipeline(std::shared_ptr<const ServedPipeline> pipeline, InferRequest request,
                     Nanos received, grpc::ServerUnaryReactor* reactor,
                     grpc::ByteBuffer* response_bytes, InFlightLimit::Permit permit);
  // Answers a ModelInfer call and ends its place among those in flight.
  void Reply(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* response_bytes,
             InFlightLimit::Permit permit,
             absl::StatusOr<inference::ModelInferResponse> response);

  const Options o_;
  mutable absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace maitre::controller
