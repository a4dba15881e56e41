// The worker's side of maitre.worker.v1.Worker over gRPC's completion-queue
// API, driven by one thread of our own: no thread is held per call. Infer
// goes straight to the instance's queue; Load, Unload, Profile and Evaluate
// run on a control work queue so that a slow load never holds that thread.
// Answers are sent from whichever thread has them (a replica, the control
// queue).
//
// Why not gRPC's callback API: in the gRPC this builds on (1.51), callbacks
// run on two "nexting" threads that take turns polling, so every event on a
// connection woke both of them: ~7 thread wake-ups per query in the worker,
// each a hypervisor round trip on a virtual machine. With one thread of our
// own waiting on the queue, that thread is the one that polls, and a query
// costs it one wake-up (docs/architecture.md, "Where a query's time goes").
// The worker's calls to the controller are synchronous, so no callback
// threads exist in the process at all.
//
// Profile and Evaluate run counted as registration work (RegistrationCpu),
// which the worker leaves out of the utilisation it reports.
//
// Thread-safety: thread-safe. Lifecycle: construct, AddTo(builder), build
// and start the server, Start(); to stop: Server::Shutdown(), then stop
// everything that may still answer a call (the instances, the control
// queue), then Stop().
#pragma once

#include <memory>
#include <thread>

#include <grpcpp/server_builder.h>

#include "core/clock.h"
#include "core/work_queue.h"
#include "maitre/worker.grpc.pb.h"
#include "runtime/process_stats.h"
#include "worker/instance_manager.h"
#include "worker/registration_cpu.h"

namespace maitre::worker {

class WorkerService {
 public:
  // Only calls carrying `call_token` ("authorization: Bearer <token>") are
  // served: the controller's (docs/operations.md, "Security"); others get
  // UNAUTHENTICATED.
  // Loads and unloads run in order on `serving`; profiling, evaluation and
  // checks on `background`, so that a load for queries never waits behind
  // a profile sweep (on one queue, a query after a restart waited out its
  // 30 s deadline behind another app's sweeps).
  WorkerService(InstanceManager* manager, const Clock* clock, WorkQueue* serving,
                WorkQueue* background, std::string call_token)
      : manager_(manager),
        clock_(clock),
        serving_(serving),
        background_(background),
        call_token_(std::move(call_token)) {}
  ~WorkerService();

  // Registers the service and its completion queue; before BuildAndStart.
  void AddTo(grpc::ServerBuilder& builder);
  // After BuildAndStart: waits for calls of every kind on its own thread.
  void Start();
  // After the server is shut down and nothing can answer a call any more:
  // drains the completion queue and joins the thread. Idempotent.
  void Stop();

  // Process CPU seconds spent while profiling or evaluating so far,
  // including the part of a job still running.
  double RegistrationCpuSeconds() const { return registration_cpu_.Seconds(); }

  template <typename Request, typename Response>
  class Call;
  template <typename Request, typename Response>
  using RequestMethod = void (v1::Worker::AsyncService::*)(
      grpc::ServerContext*, Request*, grpc::ServerAsyncResponseWriter<Response>*,
      grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);
  template <typename Request, typename Response>
  using Handler = void (WorkerService::*)(Call<Request, Response>*);

 private:
  void Loop();
  bool Authorised(const grpc::ServerContext& context) const;
  // Asks gRPC for the next call that `request_method` receives, for `handler`.
  template <typename Request, typename Response>
  void Await(RequestMethod<Request, Response> request_method, Handler<Request, Response> handler);

  void Infer(Call<v1::InferRequest, v1::InferResponse>* call);
  void Load(Call<v1::LoadRequest, v1::LoadResponse>* call);
  void Unload(Call<v1::UnloadRequest, v1::UnloadResponse>* call);
  void Profile(Call<v1::ProfileRequest, v1::ProfileResponse>* call);
  void Evaluate(Call<v1::EvaluateRequest, v1::EvaluateResponse>* call);
  void RunOnce(Call<v1::RunOnceRequest, v1::RunOnceResponse>* call);

  InstanceManager* const manager_;
  const Clock* const clock_;
  WorkQueue* const serving_;
  WorkQueue* const background_;
  const std::string call_token_;
  RegistrationCpu registration_cpu_{{runtime::ProcessCpuSeconds, runtime::CallingThreadCpuClock,
                                     runtime::CallingThreadCores}};
  v1::Worker::AsyncService service_;
  std::unique_ptr<grpc::ServerCompletionQueue> queue_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace maitre::worker
