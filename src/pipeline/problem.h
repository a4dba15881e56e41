// What the pipeline planner, estimator and tuner work on (docs/pipelines.md,
// "Planning"; InferLine §4): the pipeline's stages in topological order with
// their measured branch probabilities, each stage's profile on every
// hardware it can run on, the hardware's prices, and a configuration (per
// stage: hardware, maximum batch, replicas).
//
// One replica occupies one worker of its hardware type and is billed that
// type's price, as InferLine bills a model replica one GPU or CPU (§6).
//
// Thread-safety: value types and pure functions.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/profile.h"
#include "core/rng.h"
#include "pipeline/spec.h"

namespace maitre::pipeline {

struct Hardware {
  std::string name;
  double price_per_hour = 0;  // dollars, per replica
};

// An edge into a stage and the probability that it is taken given that its
// source ran: 1 for a plain edge, the measured branch probability for a
// conditional one.
struct StageEdge {
  int32_t from = 0;  // an earlier stage
  double probability = 1;
};

// The stage's model on one hardware.
struct StageOption {
  int32_t hardware = 0;  // index into PlanningProblem::hardware
  Profile profile;
};

struct PlanningStage {
  std::string name;
  std::vector<StageEdge> in;  // empty: the stage sees every query
  std::vector<StageOption> options;
};

struct PlanningProblem {
  std::vector<Hardware> hardware;
  std::vector<PlanningStage> stages;  // topological order: edges point forward
};

struct StageConfig {
  int32_t option = 0;  // index into the stage's options
  int32_t batch = 1;   // the stage's maximum batch
  int32_t replicas = 1;
  bool operator==(const StageConfig& o) const {
    return option == o.option && batch == o.batch && replicas == o.replicas;
  }
};
using PipelineConfig = std::vector<StageConfig>;

// Checks indices, probabilities in [0,1], profiles present and prices not
// negative; errors name the stage.
absl::Status CheckProblem(const PlanningProblem& problem);

// Dollars per hour for the configuration's replicas.
double CostPerHour(const PlanningProblem& problem, const PipelineConfig& config);

// The scale factor s_m of every stage (InferLine §4.1): the probability that
// a query entering the pipeline reaches it, with edges taken independently
// (exact for trees such as cascades; for a stage that joins several paths,
// the product over its in-edges of P(source) · p, as the estimator draws).
std::vector<double> ScaleFactors(const PlanningProblem& problem);

// The stages one query visits, drawn from `rng` by the branch
// probabilities: a stage with in-edges is visited when every source of
// them was and every edge's draw is taken. One draw is made per edge even
// when its source was skipped, so that a query's later draws are the same
// whatever the probabilities (common random numbers: the estimator's
// candidates and the simulator's runs see the same paths). `in_edges`:
// per stage, in topological order, its in-edges. `visits` gets one flag
// per stage.
void DrawVisits(const std::vector<std::vector<StageEdge>>& in_edges, Rng& rng,
                std::vector<uint8_t>& visits);

// The service time of a configuration (Algorithm 1, line 6): the largest
// sum of batch latencies (profile p50) along any path through the stages.
double ServiceTimeMs(const PlanningProblem& problem, const PipelineConfig& config);

// The stages of a validated pipeline, in its topological order, with the
// given branch probabilities for conditional edges (keyed "from->to"; a
// conditional edge without one is an error) and each vertex's profiles by
// hardware name from `profiles` (keyed by model). Hardware with no profile
// for a model is not an option for its stage.
absl::StatusOr<PlanningProblem> ProblemFromPipeline(
    const ValidatedPipeline& pipeline, const std::vector<Hardware>& hardware,
    const std::map<std::string, std::map<std::string, Profile>>& profiles,
    const std::map<std::string, double>& branch_probability);

std::string DescribeConfig(const PlanningProblem& problem, const PipelineConfig& config);

}  // namespace maitre::pipeline
