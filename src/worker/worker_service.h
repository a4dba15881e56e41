// The worker's side of maitre.worker.v1.Worker over gRPC's callback API: no
// thread is held per call. Infer goes straight to the instance's queue;
// Load, Unload, Profile and Evaluate run on a control work queue so that a
// slow load never holds a gRPC thread.
//
// Profile and Evaluate run counted as registration work (RegistrationCpu),
// which the worker leaves out of the utilisation it reports.
//
// Thread-safety: thread-safe (gRPC calls it from its own threads).
#pragma once

#include "core/clock.h"
#include "core/work_queue.h"
#include "maitre/worker.grpc.pb.h"
#include "runtime/process_stats.h"
#include "worker/instance_manager.h"
#include "worker/registration_cpu.h"

namespace maitre::worker {

class WorkerService final : public ::maitre::worker::v1::Worker::CallbackService {
 public:
  WorkerService(InstanceManager* manager, const Clock* clock, WorkQueue* control)
      : manager_(manager), clock_(clock), control_(control) {}

  grpc::ServerUnaryReactor* Infer(grpc::CallbackServerContext* context,
                                  const v1::InferRequest* request,
                                  v1::InferResponse* response) override;
  grpc::ServerUnaryReactor* Load(grpc::CallbackServerContext* context,
                                 const v1::LoadRequest* request,
                                 v1::LoadResponse* response) override;
  grpc::ServerUnaryReactor* Unload(grpc::CallbackServerContext* context,
                                   const v1::UnloadRequest* request,
                                   v1::UnloadResponse* response) override;
  grpc::ServerUnaryReactor* Profile(grpc::CallbackServerContext* context,
                                    const v1::ProfileRequest* request,
                                    v1::ProfileResponse* response) override;
  grpc::ServerUnaryReactor* Evaluate(grpc::CallbackServerContext* context,
                                     const v1::EvaluateRequest* request,
                                     v1::EvaluateResponse* response) override;

  // Process CPU seconds spent while profiling or evaluating so far,
  // including the part of a job still running.
  double RegistrationCpuSeconds() const { return registration_cpu_.Seconds(); }

 private:
  InstanceManager* const manager_;
  const Clock* const clock_;
  WorkQueue* const control_;
  RegistrationCpu registration_cpu_{runtime::ProcessCpuSeconds};
};

}  // namespace maitre::worker
