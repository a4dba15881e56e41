#include "worker/worker_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "rpc/convert.h"

namespace maitre::worker {
namespace {

// The gRPC deadline is an absolute wall-clock time; the instance works on
// the injected clock, so convert through the time remaining.
Nanos DeadlineOnClock(const grpc::CallbackServerContext& context, const Clock& clock) {
  auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return kInfiniteFuture;
  auto remaining = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       deadline - std::chrono::system_clock::now())
                       .count();
  return clock.Now() + remaining;
}

}  // namespace

grpc::ServerUnaryReactor* WorkerService::Infer(grpc::CallbackServerContext* context,
                                               const v1::InferRequest* request,
                                               v1::InferResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  VariantKey key{request->model(), request->variant()};
  std::shared_ptr<Instance> instance = manager_->Find(key);
  if (instance == nullptr) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 absl::StrCat(key.ToString(), " is not loaded on this worker")));
    return reactor;
  }
  InferTask task;
  task.inputs.reserve(request->inputs_size());
  for (const v1::Tensor& t : request->inputs()) task.inputs.push_back(rpc::FromProto(t));
  task.rows = task.inputs.empty() || task.inputs[0].shape.empty()
                  ? 1
                  : static_cast<int32_t>(task.inputs[0].shape[0]);
  task.deadline = DeadlineOnClock(*context, *clock_) - request->reply_margin_us() * kMicrosecond;
  task.best_effort = request->best_effort();
  task.objective = request->objective_us() > 0
                       ? std::min(task.deadline, clock_->Now() + request->objective_us() * kMicrosecond)
                       : task.deadline;
  task.done = [reactor, response](InferResult result) {
    if (result.status.ok()) {
      for (Tensor& t : result.outputs) rpc::ToProto(std::move(t), response->add_outputs());
    }
    v1::Timings* timings = response->mutable_timings();
    timings->set_queue_us(result.queue / kMicrosecond);
    timings->set_compute_us(result.compute / kMicrosecond);
    timings->set_total_us(result.total / kMicrosecond);
    timings->set_batch_size(result.batch_rows);
    reactor->Finish(rpc::ToGrpc(result.status));
  };
  instance->Submit(std::move(task));
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Load(grpc::CallbackServerContext* context,
                                              const v1::LoadRequest* request,
                                              v1::LoadResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  control_->Post([this, reactor, request, response] {
    auto spec = rpc::FromProto(request->variant());
    if (!spec.ok()) {
      reactor->Finish(rpc::ToGrpc(spec.status()));
      return;
    }
    auto outcome = manager_->Load(*spec, request->replicas(), rpc::FromProto(request->profile()));
    if (outcome.ok()) {
      response->set_load_ms(outcome->load_ms);
      response->set_memory_mb(outcome->memory_mb);
    }
    reactor->Finish(rpc::ToGrpc(outcome.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Unload(grpc::CallbackServerContext* context,
                                                const v1::UnloadRequest* request,
                                                v1::UnloadResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  control_->Post([this, reactor, request] {
    reactor->Finish(rpc::ToGrpc(manager_->Unload({request->model(), request->variant()})));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Profile(grpc::CallbackServerContext* context,
                                                 const v1::ProfileRequest* request,
                                                 v1::ProfileResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  control_->Post([this, reactor, request, response] {
    auto spec = rpc::FromProto(request->variant());
    if (!spec.ok()) {
      reactor->Finish(rpc::ToGrpc(spec.status()));
      return;
    }
    ProfileOptions options;
    if (!request->batch_sizes().empty()) {
      options.batch_sizes.assign(request->batch_sizes().begin(), request->batch_sizes().end());
    }
    if (request->latency_ceiling_ms() > 0) {
      options.latency_ceiling_ms = request->latency_ceiling_ms();
    }
    if (request->warmup() > 0) options.warmup = request->warmup();
    if (request->repetitions() > 0) options.repetitions = request->repetitions();
    for (const v1::Tensor& t : request->sample()) options.sample.push_back(rpc::FromProto(t));
    absl::StatusOr<::maitre::Profile> profile;
    registration_cpu_.Run([&] { profile = manager_->ProfileVariant(*spec, options); });
    if (profile.ok()) {
      response->set_load_ms(profile->load_ms());
      response->set_memory_mb(profile->memory_mb());
      rpc::ToProto(profile->points(), response->mutable_latencies());
    }
    reactor->Finish(rpc::ToGrpc(profile.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Evaluate(grpc::CallbackServerContext* context,
                                                  const v1::EvaluateRequest* request,
                                                  v1::EvaluateResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  control_->Post([this, reactor, request, response] {
    auto spec = rpc::FromProto(request->variant());
    if (!spec.ok()) {
      reactor->Finish(rpc::ToGrpc(spec.status()));
      return;
    }
    absl::StatusOr<runtime::Accuracy> accuracy;
    registration_cpu_.Run([&] {
      accuracy = manager_->Evaluate(*spec, request->valset_blob(), request->batch_size());
    });
    if (accuracy.ok()) {
      response->set_accuracy(accuracy->top1);
      response->set_examples(accuracy->examples);
    }
    reactor->Finish(rpc::ToGrpc(accuracy.status()));
  });
  return reactor;
}

}  // namespace maitre::worker
