#include "cli/plan_command.h"

#include <cstdlib>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/arrivals.h"
#include "pipeline/applied_plan.h"

namespace maitre::cli {
namespace {

using ::testing::HasSubstr;

std::string Example(const std::string& file) {
  const char* root = std::getenv("MAITRE_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/examples/pipelines/cascade/" + file;
}

// A Poisson trace at `qps` for 30 s, written where the test may write.
std::string WriteTrace(double qps) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kPoisson;
  spec.rate_qps = qps;
  spec.duration = 30 * kSecond;
  std::vector<Arrival> arrivals;
  auto source = *CreateGenerator(spec);
  Arrival a;
  while (source->Next(&a)) arrivals.push_back(a);
  const std::string path = ::testing::TempDir() + "/plan-trace.csv";
  std::ofstream(path) << WriteTraceCsv(arrivals, {"cascade"});
  return path;
}

PlanArgs CascadeArgs() {
  PlanArgs args;
  args.pipeline = Example("spec.json");
  args.models = Example("models.json");
  args.profiles = Example("profiles.csv");
  args.trace = WriteTrace(2000);
  args.slo_ms = 20;
  args.worker_types = "cpu-1:1:2048:0.0425,cpu-2:2:4096:0.085,gpu:4:16384:0.9";
  args.branches = {"fast->slow=0.3"};
  args.max_batch = 32;
  args.max_replicas = 32;
  return args;
}

TEST(PlanCommandTest, PlansTheCascadeChecksItAndComparesTheBaselines) {
  PlanArgs args = CascadeArgs();
  args.check = true;
  args.baselines = true;
  args.json = true;
  absl::StatusOr<std::string> out = RunPlan(args);
  ASSERT_TRUE(out.ok()) << out.status();
  const nlohmann::json j = nlohmann::json::parse(*out);
  EXPECT_EQ(j["pipeline"], "fmnist-cascade");
  const nlohmann::json& plan = j["plan"];
  ASSERT_EQ(plan["stages"].size(), 2u);
  EXPECT_EQ(plan["stages"][0]["stage"], "fast");
  EXPECT_DOUBLE_EQ(plan["stages"][1]["scale_factor"].get<double>(), 0.3);
  EXPECT_LE(plan["estimated_p99_ms"].get<double>(), 20);
  EXPECT_GT(j["check"]["cheaper_single_actions_refuted"].get<int64_t>(), 0);
  // The tuner's starting point: one rate per window, µ, s and ρ per stage.
  const nlohmann::json& tuner = j["tuner"];
  EXPECT_EQ(tuner["windows_s"].size(), tuner["planned_rates_qps"].size());
  EXPECT_EQ(tuner["windows_s"].size(), tuner["planned_count_deviations"].size());
  // The envelope stops at the trace's length, 30 s.
  EXPECT_NEAR(tuner["windows_s"].back().get<double>(), 30, 0.1);
  ASSERT_EQ(tuner["stages"].size(), 2u);
  EXPECT_GT(tuner["stages"][1]["rho"].get<double>(), 0);
  // The baselines replicate the whole pipeline: never cheaper than the plan.
  for (const char* b : {"CG-Mean", "CG-Peak"}) {
    ASSERT_TRUE(j["baselines"][b].contains("cost_per_hour")) << j["baselines"][b].dump();
    EXPECT_GE(j["baselines"][b]["cost_per_hour"].get<double>(),
              plan["cost_per_hour"].get<double>())
        << b;
  }
}

TEST(PlanCommandTest, TheTableNamesEveryStageAndTheCost) {
  absl::StatusOr<std::string> out = RunPlan(CascadeArgs());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, HasSubstr("STAGE"));
  EXPECT_THAT(*out, HasSubstr("fast"));
  EXPECT_THAT(*out, HasSubstr("slow"));
  EXPECT_THAT(*out, HasSubstr("estimated P99"));
}

TEST(PlanCommandTest, BadInputGetsClearErrors) {
  PlanArgs args = CascadeArgs();
  args.branches.clear();
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("fast->slow"));
  args = CascadeArgs();
  args.branches = {"fast->slow=1.5"};
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("probability in [0,1]"));
  args = CascadeArgs();
  args.slo_ms = 0.5;  // below the fastest service time
  EXPECT_EQ(RunPlan(args).status().code(), absl::StatusCode::kFailedPrecondition);
  args = CascadeArgs();
  args.models = Example("spec.json");  // not a model table
  EXPECT_FALSE(RunPlan(args).ok());
  args = CascadeArgs();
  args.trace = "/nonexistent/trace.csv";
  EXPECT_FALSE(RunPlan(args).ok());
  args = CascadeArgs();
  args.apply = "http://127.0.0.1:1";
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("--apply needs --app"));
}

// --from reads from a server what the files give otherwise; mixing the two,
// or leaving out what either needs, is refused before any request is sent.
TEST(PlanCommandTest, FromAServerOrFromFilesNotBoth) {
  PlanArgs args = CascadeArgs();
  args.variants = {"fmnist-logreg=torch"};
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("--variant goes with --from"));
  args = CascadeArgs();
  args.models.clear();
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("--models and --profiles are needed"));
  args = CascadeArgs();
  args.from = "http://127.0.0.1:1";
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("--from needs --app"));
  args.app = "fashion";
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("drop --models and --profiles"));
  args.models.clear();
  args.profiles.clear();
  args.variants = {"fmnist-logreg"};
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("expected model=variant"));
  args.variants.clear();
  // Nothing listens on port 1.
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("cannot reach the server"));
}

// The serving path is added once per stage a query visits: at least once,
// so a plan costs at least as much with it, and an overhead above the
// objective leaves no plan.
TEST(PlanCommandTest, TheStageOverheadRaisesTheEstimate) {
  PlanArgs args = CascadeArgs();
  args.json = true;
  args.stage_overhead_ms = 0;
  const nlohmann::json bare = nlohmann::json::parse(*RunPlan(args));
  args.stage_overhead_ms = 3;
  const nlohmann::json served = nlohmann::json::parse(*RunPlan(args));
  EXPECT_EQ(served["stage_overhead_ms"].get<double>(), 3);
  EXPECT_GE(served["plan"]["estimated_p99_ms"].get<double>(), 3);
  EXPECT_GE(served["plan"]["cost_per_hour"].get<double>(),
            bare["plan"]["cost_per_hour"].get<double>());
  args.stage_overhead_ms = 21;  // no replicas make up for it: the planner gives up
  EXPECT_EQ(RunPlan(args).status().code(), absl::StatusCode::kResourceExhausted);
  args.stage_overhead_ms = -1;
  EXPECT_THAT(RunPlan(args).status().message(), HasSubstr("--stage-overhead-ms"));
}

// What --json prints is what --apply sends and the server reads back
// (pipeline/applied_plan.h): the same stages, replicas and tuner figures.
TEST(PlanCommandTest, TheJsonReportIsAPlanAServerAccepts) {
  PlanArgs args = CascadeArgs();
  args.json = true;
  auto report = RunPlan(args);
  ASSERT_TRUE(report.ok()) << report.status();
  auto plan = pipeline::ParseAppliedPlanJson(*report);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const nlohmann::json j = nlohmann::json::parse(*report);
  ASSERT_EQ(plan->stages.size(), j["plan"]["stages"].size());
  for (size_t i = 0; i < plan->stages.size(); ++i) {
    EXPECT_EQ(plan->stages[i].vertex, j["plan"]["stages"][i]["stage"]);
    EXPECT_EQ(plan->stages[i].hardware, j["plan"]["stages"][i]["hardware"]);
    // The variant the profiles name, which the server then holds the stage to.
    EXPECT_EQ(plan->stages[i].variant, "torch");
    EXPECT_EQ(plan->tuner.stages[i].replicas, j["plan"]["stages"][i]["replicas"]);
    EXPECT_DOUBLE_EQ(plan->tuner.stages[i].rho, j["tuner"]["stages"][i]["rho"]);
  }
  EXPECT_EQ(plan->tuner.windows.size(), j["tuner"]["windows_s"].size());
}

}  // namespace
}  // namespace maitre::cli
