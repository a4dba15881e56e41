#include "pipeline/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pipeline/testing/problems.h"
#include "sim/pipeline_estimator.h"

namespace maitre::pipeline {
namespace {

using ::testing::HasSubstr;
using testing::Cascade;
using testing::GammaArrivals;
using testing::LinearProfile;

constexpr int32_t kMaxBatch = 8;
// The planner's replica limit, and the smaller one of the brute force for
// guarantee (1): Algorithm 1 only adds replicas at batch 1, so the guarantee
// holds for a configuration that needs larger batches within a limit only
// when the planner may go further (with no limit, as in the paper).
constexpr int32_t kMaxReplicas = 24;
constexpr int32_t kBruteForceReplicas = 6;

// The planner as `maitre plan` runs it: the estimator stops once a
// configuration is known to miss the objective.
struct Estimated {
  Estimated(const PlanningProblem& problem, double slo_ms, std::vector<Nanos> trace)
      : arrivals(std::move(trace)), oracle(sim::EstimatorOracle(problem, arrivals, slo_ms)) {}
  std::vector<Nanos> arrivals;
  LatencyOracle oracle;
};

PlannerOptions Options(double slo_ms) {
  PlannerOptions o;
  o.slo_ms = slo_ms;
  o.max_batch = kMaxBatch;
  o.max_replicas = kMaxReplicas;
  return o;
}

// Every configuration within the planner's limits: each stage on each of its
// options, at batch 1, 2, 4, ..., max, with 1..max replicas.
std::vector<PipelineConfig> AllConfigs(const PlanningProblem& problem) {
  std::vector<PipelineConfig> all = {{}};
  for (const PlanningStage& stage : problem.stages) {
    std::vector<PipelineConfig> next;
    for (const PipelineConfig& prefix : all) {
      for (int32_t o = 0; o < static_cast<int32_t>(stage.options.size()); ++o) {
        for (int32_t b = 1; b <= kMaxBatch; b *= 2) {
          for (int32_t r = 1; r <= kBruteForceReplicas; ++r) {
            PipelineConfig c = prefix;
            c.push_back({o, b, r});
            next.push_back(std::move(c));
          }
        }
      }
    }
    all = std::move(next);
  }
  return all;
}

// Guarantee (2), by brute force: from `plan`, no single action (one replica
// fewer; the next cheaper hardware at any batch and replica count) gives a
// feasible configuration that costs less. Returns how many it refuted.
int ExpectNoCheaperSingleAction(const PlanningProblem& problem, Planner& planner,
                                const Plan& plan) {
  int refuted = 0;
  for (const PipelineConfig& c : planner.CheaperSingleActions(plan.config)) {
    auto feasible = planner.Feasible(c);
    EXPECT_TRUE(feasible.ok()) << feasible.status();
    EXPECT_FALSE(feasible.ok() && *feasible)
        << "cheaper and feasible: " << DescribeConfig(problem, c) << " than the plan "
        << DescribeConfig(problem, plan.config);
    ++refuted;
  }
  return refuted;
}

struct Workload {
  double rate_qps;
  double cv;
  double slo_ms;
  double branch;
};

class PlannerGuaranteesTest : public ::testing::TestWithParam<Workload> {};

TEST_P(PlannerGuaranteesTest, FeasibleWhenAnythingIsAndNoSingleActionLowersTheCost) {
  const Workload w = GetParam();
  const PlanningProblem problem = Cascade(w.branch);
  const Estimated estimated(problem, w.slo_ms, GammaArrivals(w.rate_qps, w.cv, 20 * kSecond));
  Planner planner(problem, estimated.oracle, Options(w.slo_ms));
  // Guarantee (1), by brute force over every configuration in the limits.
  bool any_feasible = false;
  for (const PipelineConfig& c : AllConfigs(problem)) {
    auto ok = planner.Feasible(c);
    ASSERT_TRUE(ok.ok()) << ok.status();
    if (*ok) {
      any_feasible = true;
      break;
    }
  }
  absl::StatusOr<Plan> plan = planner.MinimizeCost();
  ASSERT_EQ(plan.ok(), any_feasible) << plan.status();
  if (!plan.ok()) return;
  EXPECT_LE(plan->p99_ms, w.slo_ms);
  EXPECT_NEAR(plan->cost_per_hour, CostPerHour(problem, plan->config), 1e-12);
  const int refuted = ExpectNoCheaperSingleAction(problem, planner, *plan);
  // Not vacuous: a plan dearer than one replica per stage on the CPU has
  // cheaper neighbours, and each was refuted.
  const PipelineConfig cheapest = {{1, 1, 1}, {1, 1, 1}};
  if (plan->cost_per_hour > CostPerHour(problem, cheapest)) {
    EXPECT_GT(refuted, 0) << DescribeConfig(problem, plan->config);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Workloads, PlannerGuaranteesTest,
    ::testing::Values(Workload{50, 1, 40, 0.3}, Workload{200, 1, 40, 0.3},
                      Workload{200, 4, 30, 0.5}, Workload{400, 0.1, 60, 0.2},
                      Workload{100, 1, 150, 0.3}, Workload{300, 4, 100, 0.8},
                      Workload{100, 1, 12, 0.3}, Workload{100, 1, 5, 0.3}));

TEST(PlannerTest, AnObjectiveBelowTheServiceTimeIsRefusedAtOnce) {
  const PlanningProblem problem = Cascade(0.3);
  int64_t asked = 0;
  Planner planner(problem,
                  [&](const PipelineConfig&) -> absl::StatusOr<double> {
                    ++asked;
                    return 0.0;
                  },
                  Options(12));  // fast 2.1 + slow 10.5 on the GPU
  absl::StatusOr<Plan> plan = planner.MinimizeCost();
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), HasSubstr("12.6 ms"));
  EXPECT_EQ(asked, 0);
}

TEST(PlannerTest, InitializeStartsFastestAtBatchOneAndAddsToTheBottleneck) {
  const PlanningProblem problem = Cascade(1);
  // Feasible once the slow stage (10.5 ms, 95/s) has three replicas: the
  // oracle is a fake that only counts replicas.
  Planner planner(problem,
                  [](const PipelineConfig& c) -> absl::StatusOr<double> {
                    return c[1].replicas >= 3 ? 10.0 : 1000.0;
                  },
                  Options(100));
  absl::StatusOr<Plan> plan = planner.Initialize();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->config, (PipelineConfig{{0, 1, 1}, {0, 1, 3}}));
  EXPECT_EQ(plan->steps.size(), 2u);
}

TEST(PlannerTest, ALightStageMovesToCheapHardwareAndADearOneBatches) {
  // The fast model is cheap to run anywhere: it ends on the CPU. The slow
  // one only fits the objective on the GPU, so it batches instead.
  const PlanningProblem problem = Cascade(0.3);
  // 40 ms: the slow model takes 38 ms alone on the CPU, too slow after any
  // first stage; on the GPU 10.5 ms.
  const Estimated estimated(problem, 40, GammaArrivals(200, 1, 20 * kSecond));
  Planner planner(problem, estimated.oracle, Options(40));
  absl::StatusOr<Plan> plan = planner.MinimizeCost();
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int32_t cpu = 1, gpu = 0;
  EXPECT_EQ(problem.stages[0].options[plan->config[0].option].hardware, cpu)
      << DescribeConfig(problem, plan->config);
  EXPECT_EQ(problem.stages[1].options[plan->config[1].option].hardware, gpu);
  EXPECT_THAT(::testing::PrintToString(plan->steps), HasSubstr("DowngradeHardware fast"));
}

TEST(PlannerTest, CheaperSingleActionsAreOneReplicaFewerOrTheNextCheaperHardware) {
  const PlanningProblem problem = Cascade(0.3);
  Planner planner(problem, [](const PipelineConfig&) { return absl::StatusOr<double>(1.0); },
                  Options(100));
  // fast on the GPU with 3 replicas ($2.70), slow on the CPU with 2 ($0.20).
  const std::vector<PipelineConfig> moves =
      planner.CheaperSingleActions({{0, 2, 3}, {1, 4, 2}});
  // fast: 2 replicas; or the CPU at 4 batches x (1..24 replicas under $2.70:
  // all 24). slow: 1 replica; the CPU is its cheapest hardware.
  EXPECT_EQ(moves.size(), 1u + 4 * 24 + 1);
  for (const PipelineConfig& c : moves) {
    EXPECT_LT(CostPerHour(problem, c), CostPerHour(problem, {{0, 2, 3}, {1, 4, 2}}));
  }
}

TEST(PlannerTest, RefusesBadOptionsAndReportsOracleErrors) {
  const PlanningProblem problem = Cascade(0.3);
  Planner no_slo(problem, [](const PipelineConfig&) { return absl::StatusOr<double>(1.0); },
                 Options(0));
  EXPECT_EQ(no_slo.MinimizeCost().status().code(), absl::StatusCode::kInvalidArgument);
  Planner broken(problem,
                 [](const PipelineConfig&) -> absl::StatusOr<double> {
                   return absl::InternalError("estimator broke");
                 },
                 Options(100));
  EXPECT_THAT(broken.MinimizeCost().status().message(), HasSubstr("estimator broke"));
  Planner never(problem, [](const PipelineConfig&) { return absl::StatusOr<double>(1e9); },
                Options(100));
  EXPECT_EQ(never.MinimizeCost().status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace maitre::pipeline
