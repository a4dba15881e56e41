#include "pipeline/problem.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::pipeline {

absl::Status CheckProblem(const PlanningProblem& problem) {
  if (problem.stages.empty()) return absl::InvalidArgumentError("the pipeline has no stages");
  for (const Hardware& h : problem.hardware) {
    if (!(h.price_per_hour >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("hardware \"", h.name, "\": a price is not negative"));
    }
  }
  for (size_t i = 0; i < problem.stages.size(); ++i) {
    const PlanningStage& s = problem.stages[i];
    const std::string where = absl::StrCat("stage \"", s.name, "\": ");
    if (s.options.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "no hardware has a profile for it"));
    }
    for (const StageOption& o : s.options) {
      if (o.hardware < 0 || o.hardware >= static_cast<int32_t>(problem.hardware.size())) {
        return absl::InvalidArgumentError(absl::StrCat(where, "unknown hardware index"));
      }
      if (o.profile.empty()) return absl::InvalidArgumentError(absl::StrCat(where, "no profile"));
    }
    for (const StageEdge& e : s.in) {
      if (e.from < 0 || e.from >= static_cast<int32_t>(i)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "an edge must come from an earlier stage"));
      }
      if (!(e.probability >= 0 && e.probability <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "a branch probability lies in [0,1]"));
      }
    }
  }
  return absl::OkStatus();
}

double CostPerHour(const PlanningProblem& problem, const PipelineConfig& config) {
  double cost = 0;
  for (size_t i = 0; i < config.size(); ++i) {
    const StageOption& o = problem.stages[i].options[config[i].option];
    cost += config[i].replicas * problem.hardware[o.hardware].price_per_hour;
  }
  return cost;
}

void DrawVisits(const std::vector<std::vector<StageEdge>>& in_edges, Rng& rng,
                std::vector<uint8_t>& visits) {
  visits.assign(in_edges.size(), 0);
  for (size_t s = 0; s < in_edges.size(); ++s) {
    bool visit = true;
    for (const StageEdge& e : in_edges[s]) {
      const bool taken = rng.Uniform() < e.probability;
      visit = visit && visits[e.from] != 0 && taken;
    }
    visits[s] = visit;
  }
}

std::vector<double> ScaleFactors(const PlanningProblem& problem) {
  std::vector<double> s(problem.stages.size(), 1.0);
  for (size_t i = 0; i < problem.stages.size(); ++i) {
    for (const StageEdge& e : problem.stages[i].in) s[i] *= s[e.from] * e.probability;
  }
  return s;
}

double ServiceTimeMs(const PlanningProblem& problem, const PipelineConfig& config) {
  std::vector<double> done(problem.stages.size(), 0);
  double longest = 0;
  for (size_t i = 0; i < problem.stages.size(); ++i) {
    double start = 0;
    for (const StageEdge& e : problem.stages[i].in) start = std::max(start, done[e.from]);
    const Profile& profile = problem.stages[i].options[config[i].option].profile;
    done[i] = start + profile.LatencyAt(config[i].batch);
    longest = std::max(longest, done[i]);
  }
  return longest;
}

absl::StatusOr<PlanningProblem> ProblemFromPipeline(
    const ValidatedPipeline& pipeline, const std::vector<Hardware>& hardware,
    const std::map<std::string, std::map<std::string, Profile>>& profiles,
    const std::map<std::string, double>& branch_probability) {
  PlanningProblem problem;
  problem.hardware = hardware;
  std::vector<int32_t> stage_of(pipeline.spec.vertices.size(), -1);
  for (int32_t v : pipeline.order) {
    stage_of[v] = static_cast<int32_t>(problem.stages.size());
    const Vertex& vertex = pipeline.spec.vertices[v];
    PlanningStage stage;
    stage.name = vertex.name;
    auto by_hw = profiles.find(vertex.model);
    for (size_t h = 0; h < hardware.size(); ++h) {
      if (by_hw == profiles.end()) break;
      auto p = by_hw->second.find(hardware[h].name);
      if (p != by_hw->second.end()) stage.options.push_back({static_cast<int32_t>(h), p->second});
    }
    if (stage.options.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vertex \"", vertex.name, "\": model \"", vertex.model, "\" has no profile on any of "
          "the given hardware"));
    }
    problem.stages.push_back(std::move(stage));
  }
  for (const Edge& e : pipeline.edges) {
    StageEdge in{stage_of[pipeline.VertexIndex(e.from)], 1.0};
    if (e.when) {
      const std::string key = absl::StrCat(e.from, "->", e.to);
      auto p = branch_probability.find(key);
      if (p == branch_probability.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "edge \"", key, "\" is conditional: planning needs its measured branch probability"));
      }
      in.probability = p->second;
    }
    problem.stages[stage_of[pipeline.VertexIndex(e.to)]].in.push_back(in);
  }
  if (auto s = CheckProblem(problem); !s.ok()) return s;
  return problem;
}

std::string DescribeConfig(const PlanningProblem& problem, const PipelineConfig& config) {
  std::string out;
  for (size_t i = 0; i < config.size(); ++i) {
    const StageOption& o = problem.stages[i].options[config[i].option];
    absl::StrAppendFormat(&out, "%s%s=%s/b%d/x%d", i == 0 ? "" : " ", problem.stages[i].name,
                          problem.hardware[o.hardware].name, config[i].batch, config[i].replicas);
  }
  return out;
}

}  // namespace maitre::pipeline
