// InferLine's Tuner (Crankshaw et al., SoCC '20, §5; docs/pipelines.md,
// "The tuner"): between runs of the planner, it rescales each stage's
// replicas when the live traffic leaves the planning trace's envelope.
//
//  - Windows: from the configuration's service time, as §5 says, taken as
//    §4.3 defines it (the processing latencies on the longest path) with
//    each stage at batch 1: what one query takes through the idle
//    pipeline. Then doubling up to the trace's length, at most 60 s.
//  - Scaling up: the live envelope is compared with the planning trace's,
//    window by window, both drawn over the same span. A live count counts
//    as a rise when it exceeds the planned count by more than the sampling
//    noise of a busiest count (our addition: `noise_sigmas` deviations of
//    the difference of two draws, the deviation measured by redrawing the
//    planning trace, envelope_noise.h, so a fresh draw of the planned
//    process does not read as a rise). r_max is the largest rise read in
//    the plan's terms: the planning trace's mean rate times the window's
//    live count over its planned count (our reading; at the longest window
//    it is §5's live rate itself), and each
//    stage gets k_m = ceil(r_max · s_m / (µ_m · ρ_m)) replicas if it has
//    fewer (s_m its scale factor, µ_m one replica's throughput at its
//    batch, ρ_m its max-provisioning ratio).
//  - Scaling down: only once `quiet_period` (15 s) has passed since the last
//    change; λ_new is the highest rate over the last 30 s in 5 s windows,
//    and a stage with more than k_m = ceil(λ_new · s_m / (µ_m · ρ_p))
//    replicas drops to it, with ρ_p = min ρ_m over the pipeline (the
//    conservative choice §5 makes). Never below one replica, and, while
//    the live envelope still exceeds the plan, never below what r_max needs
//    (our addition: without it the two rules would undo each other on
//    every decision of a lasting rise).
//
// ρ_m, as we read §5: the planning trace's mean rate at the stage over what
// its configured replicas serve, λ · s_m / (k_m · µ_m), so that at the
// planned rate the scale-up rule gives back the planned replicas.
//
// Pure: it sees arrivals and `now` only through its arguments.
//
// Thread-safety: not synchronised; one caller.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/time.h"
#include "pipeline/envelope_noise.h"
#include "pipeline/problem.h"

namespace maitre::pipeline {

// What the planner hands the tuner (§5, "Initialization").
struct TunerStage {
  std::string name;
  double mu_qps = 0;  // one replica's throughput at the planned batch
  double scale = 1;   // s_m
  double rho = 1;     // ρ_m
  int32_t replicas = 1;
};
struct TunerPlan {
  std::vector<TunerStage> stages;
  std::vector<Nanos> windows;          // the envelope's widths
  std::vector<double> planned_rates;   // the planning trace's envelope
  // Per window, how much the busiest count spreads between draws of the
  // planning trace's process (envelope_noise.h). Empty: as a Poisson count
  // of the planned one spreads.
  std::vector<double> planned_deviations;
};

struct TunerPlanOptions {
  EnvelopeNoiseOptions noise;
};

// From a planned configuration and its planning trace: windows from the
// configuration's service time at batch 1, the trace's envelope and its
// deviations (envelope_noise.h), s_m from the branch probabilities, µ_m
// from the profile at the planned batch, ρ_m from the trace's mean rate.
absl::StatusOr<TunerPlan> MakeTunerPlan(const PlanningProblem& problem,
                                        const PipelineConfig& config,
                                        absl::Span<const Nanos> planning_arrivals,
                                        const TunerPlanOptions& options = {});

struct TunerOptions {
  Nanos quiet_period = 15 * kSecond;  // 3x a replica's 5 s activation in §5
  Nanos down_history = 30 * kSecond;
  Nanos down_window = 5 * kSecond;
  // No stage is scaled past this (the planner's default max_replicas). §5
  // states no ceiling; on a loaded host the arrival times bunch, a short
  // window's rate then reads as tens of times the real one, and the rule
  // would ask for as many times the replicas (docs/experiments.md,
  // "inferline-pipelines", "The real run"). A stage planned above it keeps
  // its replicas until it scales down.
  int32_t max_replicas = 64;
  // A live window's count must exceed the planned count q by more than
  // noise_sigmas · sqrt(2(σ² + 1/12)) to count as a rise: σ the planned
  // deviation of that window's busiest count (TunerPlan), 1/12 a count's
  // rounding; a plan without deviations takes σ² = q, a Poisson count's.
  // §5 compares the two envelopes as they are, but each is the busiest
  // window of one random trace, and the tuner looks every round: a fresh
  // draw of the planned process exceeds the planned trace in some window
  // more often than not. 4, not 3: at 3, 10 of 100 fresh four-minute
  // traces at the planned rate still scaled up (docs/pipelines.md, "The
  // tuner").
  double noise_sigmas = 4;
};

struct TunerDecision {
  enum class Kind { kNone, kUp, kDown };
  Kind kind = Kind::kNone;
  std::vector<int32_t> replicas;  // per stage, after the decision
  double rate_qps = 0;            // r_max in the plan's terms (up) or λ_new (down)
  Nanos window = 0;               // up: the width whose rate was r_max
  std::string reason;
};

class Tuner {
 public:
  // `now`: when the planned configuration started serving (the first quiet
  // period runs from there).
  static absl::StatusOr<Tuner> Create(TunerPlan plan, const TunerOptions& options, Nanos now);

  // Arrivals in non-decreasing time order.
  void Observe(Nanos arrival);
  // The scale factors s_m measured on served traffic, per stage, in place
  // of the plan's (§5 takes s_m as measured; the plan's come from the
  // branch probabilities it was given). InvalidArgument unless one per
  // stage, each in [0, 1].
  absl::Status SetScales(const std::vector<double>& scales);
  TunerDecision Decide(Nanos now);

  const std::vector<int32_t>& replicas() const { return replicas_; }
  const TunerPlan& plan() const { return plan_; }
  double rho_pipeline() const { return rho_p_; }

 private:
  Tuner(TunerPlan plan, const TunerOptions& options, Nanos now);
  // Moves the stages whose target lies in the direction `up` to it; says
  // which in `moves` and whether any moved.
  bool Move(const std::vector<int32_t>& target, bool up, std::string* moves);

  TunerPlan plan_;
  TunerOptions options_;
  double rho_p_ = 1;
  std::vector<int32_t> replicas_;
  std::deque<Nanos> recent_;  // arrivals of the longest window
  Nanos last_change_ = 0;
};

}  // namespace maitre::pipeline
