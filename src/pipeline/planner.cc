#include "pipeline/planner.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::pipeline {

namespace {

std::vector<int32_t> Key(const PipelineConfig& config) {
  std::vector<int32_t> key;
  key.reserve(config.size() * 3);
  for (const StageConfig& c : config) key.insert(key.end(), {c.option, c.batch, c.replicas});
  return key;
}

}  // namespace

const char* PlanActionName(PlanAction a) {
  switch (a) {
    case PlanAction::kIncreaseBatch: return "IncreaseBatch";
    case PlanAction::kRemoveReplica: return "RemoveReplica";
    case PlanAction::kDowngradeHardware: return "DowngradeHardware";
  }
  return "?";
}

Planner::Planner(const PlanningProblem& problem, LatencyOracle oracle,
                 const PlannerOptions& options)
    : problem_(problem), oracle_(std::move(oracle)), options_(options) {}

double Planner::Price(int32_t stage, int32_t option) const {
  return problem_.hardware[problem_.stages[stage].options[option].hardware].price_per_hour;
}

absl::StatusOr<double> Planner::P99Ms(const PipelineConfig& config) {
  std::vector<int32_t> key = Key(config);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  absl::StatusOr<double> p99 = oracle_(config);
  if (!p99.ok()) return p99.status();
  memo_.emplace(std::move(key), *p99);
  return *p99;
}

absl::StatusOr<bool> Planner::Feasible(const PipelineConfig& config) {
  absl::StatusOr<double> p99 = P99Ms(config);
  if (!p99.ok()) return p99.status();
  return *p99 <= options_.slo_ms;
}

int32_t Planner::FastestOption(int32_t stage) const {
  const auto& options = problem_.stages[stage].options;
  int32_t best = 0;
  for (int32_t o = 1; o < static_cast<int32_t>(options.size()); ++o) {
    const double l = options[o].profile.LatencyAt(1), lb = options[best].profile.LatencyAt(1);
    if (l < lb || (l == lb && Price(stage, o) < Price(stage, best))) best = o;
  }
  return best;
}

int32_t Planner::NextCheaperOption(int32_t stage, int32_t option) const {
  const double price = Price(stage, option);
  int32_t next = -1;
  for (int32_t o = 0; o < static_cast<int32_t>(problem_.stages[stage].options.size()); ++o) {
    const double p = Price(stage, o);
    if (p < price && (next < 0 || p > Price(stage, next))) next = o;
  }
  return next;
}

absl::StatusOr<Plan> Planner::Finish(PipelineConfig config, std::vector<std::string> steps) {
  Plan plan;
  absl::StatusOr<double> p99 = P99Ms(config);
  if (!p99.ok()) return p99.status();
  plan.p99_ms = *p99;
  plan.cost_per_hour = CostPerHour(problem_, config);
  plan.config = std::move(config);
  plan.steps = std::move(steps);
  plan.estimates = static_cast<int64_t>(memo_.size());
  return plan;
}

absl::StatusOr<Plan> Planner::Initialize() {
  if (auto s = CheckProblem(problem_); !s.ok()) return s;
  if (!(options_.slo_ms > 0) || options_.max_batch < 1 || options_.max_replicas < 1) {
    return absl::InvalidArgumentError("planning needs slo_ms > 0, max_batch and max_replicas >= 1");
  }
  const size_t n = problem_.stages.size();
  PipelineConfig config(n);
  for (size_t i = 0; i < n; ++i) config[i] = {FastestOption(static_cast<int32_t>(i)), 1, 1};
  const double service = ServiceTimeMs(problem_, config);
  if (service > options_.slo_ms) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no configuration can meet a %.1f ms objective: the service time at batch 1 on the "
        "fastest hardware is %.1f ms",
        options_.slo_ms, service));
  }
  const std::vector<double> scale = ScaleFactors(problem_);
  std::vector<std::string> steps;
  while (true) {
    absl::StatusOr<bool> ok = Feasible(config);
    if (!ok.ok()) return ok.status();
    if (*ok) break;
    // FindMinThru: the stage with the least capacity for its share of the
    // pipeline's queries.
    int32_t min_stage = -1;
    double min_thru = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < n; ++i) {
      if (scale[i] <= 0) continue;
      const Profile& p = problem_.stages[i].options[config[i].option].profile;
      const double thru = config[i].replicas * p.ThroughputAt(config[i].batch) / scale[i];
      if (thru < min_thru) {
        min_thru = thru;
        min_stage = static_cast<int32_t>(i);
      }
    }
    if (min_stage < 0) return absl::InternalError("no stage sees any query");
    if (config[min_stage].replicas >= options_.max_replicas) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "stage \"", problem_.stages[min_stage].name, "\" would need more than ",
          options_.max_replicas, " replicas to meet the objective"));
    }
    ++config[min_stage].replicas;
    steps.push_back(absl::StrCat("Initialize: add a replica to ", problem_.stages[min_stage].name));
  }
  return Finish(std::move(config), std::move(steps));
}

absl::StatusOr<std::optional<PipelineConfig>> Planner::Downgrade(int32_t stage,
                                                                 const PipelineConfig& config) {
  const StageConfig& now = config[stage];
  const int32_t cheaper = NextCheaperOption(stage, now.option);
  if (cheaper < 0) return std::nullopt;
  const double budget = now.replicas * Price(stage, now.option);
  std::optional<PipelineConfig> best;
  for (int32_t batch = 1; batch <= options_.max_batch; batch *= 2) {
    PipelineConfig c = config;
    c[stage] = {cheaper, batch, 1};
    // The stage must cost less than it does now, and than the best so far.
    int32_t limit = options_.max_replicas;
    if (best) limit = std::min(limit, (*best)[stage].replicas - 1);
    for (; c[stage].replicas <= limit && c[stage].replicas * Price(stage, cheaper) < budget;
         ++c[stage].replicas) {
      absl::StatusOr<bool> ok = Feasible(c);
      if (!ok.ok()) return ok.status();
      if (*ok) {
        best = c;
        break;
      }
    }
  }
  return best;
}

absl::StatusOr<std::optional<PipelineConfig>> Planner::Apply(PlanAction action, int32_t stage,
                                                             const PipelineConfig& config) {
  PipelineConfig c = config;
  switch (action) {
    case PlanAction::kIncreaseBatch:
      if (c[stage].batch * 2 > options_.max_batch) return std::nullopt;
      c[stage].batch *= 2;
      break;
    case PlanAction::kRemoveReplica:
      if (c[stage].replicas <= 1) return std::nullopt;
      --c[stage].replicas;
      break;
    case PlanAction::kDowngradeHardware:
      return Downgrade(stage, config);
  }
  absl::StatusOr<bool> ok = Feasible(c);
  if (!ok.ok()) return ok.status();
  if (!*ok) return std::nullopt;
  return c;
}

std::vector<PipelineConfig> Planner::CheaperSingleActions(const PipelineConfig& config) const {
  std::vector<PipelineConfig> moves;
  const double cost = CostPerHour(problem_, config);
  auto add = [&](PipelineConfig c) {
    if (CostPerHour(problem_, c) < cost) moves.push_back(std::move(c));
  };
  for (int32_t s = 0; s < static_cast<int32_t>(config.size()); ++s) {
    if (config[s].replicas > 1) {
      PipelineConfig c = config;
      --c[s].replicas;
      add(std::move(c));
    }
    const int32_t cheaper = NextCheaperOption(s, config[s].option);
    for (int32_t b = 1; cheaper >= 0 && b <= options_.max_batch; b *= 2) {
      for (int32_t r = 1; r <= options_.max_replicas; ++r) {
        PipelineConfig c = config;
        c[s] = {cheaper, b, r};
        add(std::move(c));
      }
    }
  }
  return moves;
}

absl::StatusOr<Plan> Planner::MinimizeCost() {
  absl::StatusOr<Plan> initial = Initialize();
  if (!initial.ok()) return initial.status();
  PipelineConfig config = initial->config;
  std::vector<std::string> steps = initial->steps;
  constexpr PlanAction kActions[] = {PlanAction::kIncreaseBatch, PlanAction::kRemoveReplica,
                                     PlanAction::kDowngradeHardware};
  while (true) {
    std::optional<PipelineConfig> best;
    double best_cost = 0, best_p99 = 0;
    std::string best_step;
    for (int32_t s = 0; s < static_cast<int32_t>(config.size()); ++s) {
      for (PlanAction a : kActions) {
        absl::StatusOr<std::optional<PipelineConfig>> next = Apply(a, s, config);
        if (!next.ok()) return next.status();
        if (!next->has_value()) continue;
        const double cost = CostPerHour(problem_, **next);
        // Equal costs (IncreaseBatch moves): the lower estimated P99 wins,
        // keeping the most slack for the moves that save money.
        absl::StatusOr<double> p99 = P99Ms(**next);
        if (!p99.ok()) return p99.status();
        if (!best || cost < best_cost || (cost == best_cost && *p99 < best_p99)) {
          best = **next;
          best_cost = cost;
          best_p99 = *p99;
          best_step = absl::StrCat(PlanActionName(a), " ", problem_.stages[s].name);
        }
      }
    }
    if (!best) break;
    config = *std::move(best);
    steps.push_back(absl::StrFormat("%s -> %s ($%.4f/h)", best_step,
                                    DescribeConfig(problem_, config), best_cost));
  }
  return Finish(std::move(config), std::move(steps));
}

}  // namespace maitre::pipeline
