// The pipeline part of allocation (docs/policies.md, "Pipelines under an
// end-to-end objective"; InferLine §5): every allocator made by name is
// wrapped in one, so pipelines with an applied plan are provisioned the same
// way beside any allocator, in the controller and in the simulator.
//
//  - Each model round, each planned pipeline's tuner (pipeline/tuner.h) is
//    shown the pipeline's arrivals since the last round and decides: scale
//    every stage up when a window of the live traffic envelope exceeds the
//    planning trace's, down after a quiet period to the recent peak. A new
//    plan (another plan_id) starts its tuner over.
//  - Each stage is then held at the tuner's replicas: replicas of the
//    stage's model on workers of the plan's type are loaded on the workers
//    with the most free cores, or removed from the largest instances. A
//    stage with a load under way is left alone until the load ends, so a
//    round never stacks a load on a report that does not show the last.
//  - Each cluster round, a stage that needs more replicas than its type's
//    workers (those starting included) have free cores for asks for
//    workers, up to the type's maximum.
//  - The allocator beside it sees everything else: the stage models are
//    taken out of its observation, with their instances; a worker that
//    holds nothing but stage instances is hidden from it, and one that also
//    holds others is shown without them and never idle, so it neither
//    scales the stages nor gives their workers back.
//
// Decisions are recorded as "pipeline-up", "pipeline-down" (the tuner's),
// "pipeline-load", "pipeline-remove" and "pipeline-add-worker".
//
// Pure: the time is the observation's. Thread-safety: rounds from one
// thread at a time; the sink's `done` may come from another.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "control/allocator.h"
#include "pipeline/tuner.h"

namespace maitre::control {

class PipelineAllocator : public Allocator {
 public:
  // `inner` decides for everything that is not a planned pipeline's stage.
  PipelineAllocator(std::unique_ptr<Allocator> inner, const AllocatorOptions& options);

  absl::Status ModelRound(const Observation& observation, ActionSink& sink) override;
  absl::Status ClusterRound(const Observation& observation, ActionSink& sink) override;

  // The tuner's replicas per stage for pipeline `app`/`name`; empty before
  // its first model round.
  std::vector<int32_t> Replicas(const std::string& app, const std::string& name) const;

 private:
  // Replicas of one stage asked for and not yet ended, by stage; shared
  // with the sink's callbacks, which may outlive a round.
  struct Pending {
    absl::Mutex mu;
    std::map<std::string, int> by_stage ABSL_GUARDED_BY(mu);
  };
  struct Tuned {
    int64_t plan_id = 0;
    pipeline::Tuner tuner;
  };

  absl::Status Tune(const Observation& observation, ActionSink& sink);
  absl::Status Provision(const Observation& observation, ActionSink& sink);
  void AddWorkers(const Observation& observation, ActionSink& sink);
  // The stage's tuned replicas: the tuner's, or the plan's before one runs.
  int32_t Target(const ObservedPipeline& p, size_t stage) const;
  int PendingFor(const std::string& stage);

  std::unique_ptr<Allocator> inner_;
  const AllocatorOptions options_;
  std::map<std::string, Tuned> tuned_;  // by "app/pipeline"
  std::set<std::string> blocked_;       // stages with no variant to load, said

  std::shared_ptr<Pending> pending_ = std::make_shared<Pending>();
};

// The observation the allocator beside the pipelines sees (above).
Observation WithoutPipelineStages(const Observation& observation);

}  // namespace maitre::control
