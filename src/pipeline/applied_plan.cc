#include "pipeline/applied_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace maitre::pipeline {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// The member `key` of `j` as an array, or why not.
absl::StatusOr<const json*> Array(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) {
    return Bad(where, absl::StrCat("needs array \"", key, "\""));
  }
  return &*it;
}

absl::StatusOr<std::string> String(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) {
    return Bad(where, absl::StrCat("needs string \"", key, "\""));
  }
  return it->get<std::string>();
}

absl::StatusOr<double> Number(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>())) {
    return Bad(where, absl::StrCat("needs number \"", key, "\""));
  }
  return it->get<double>();
}

// A count of at least one (replicas, batch): whole, and not past int32.
absl::StatusOr<int32_t> Count(const json& j, const char* key, const std::string& where) {
  auto n = Number(j, key, where);
  if (!n.ok()) return n.status();
  if (*n < 1 || *n != std::floor(*n) || *n > 1e6) {
    return Bad(where, absl::StrCat("\"", key, "\" must be a whole number from 1 to 1000000, not ",
                                   j.at(key).dump()));
  }
  return static_cast<int32_t>(*n);
}

}  // namespace

absl::StatusOr<AppliedPlan> ParseAppliedPlanJson(absl::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        "a plan must be a JSON object (maitre plan --json prints one)");
  }
  auto plan_it = j.find("plan");
  auto tuner_it = j.find("tuner");
  if (plan_it == j.end() || !plan_it->is_object() || tuner_it == j.end() ||
      !tuner_it->is_object()) {
    return absl::InvalidArgumentError("a plan needs objects \"plan\" and \"tuner\"");
  }
  auto stages = Array(*plan_it, "stages", "plan");
  auto tuned = Array(*tuner_it, "stages", "tuner");
  auto windows = Array(*tuner_it, "windows_s", "tuner");
  auto rates = Array(*tuner_it, "planned_rates_qps", "tuner");
  for (const auto* s : {&stages, &tuned, &windows, &rates}) {
    if (!s->ok()) return s->status();
  }
  if ((*stages)->empty()) return Bad("plan.stages", "is empty");
  if ((*tuned)->size() != (*stages)->size()) {
    return Bad("tuner.stages", "needs one entry per entry of plan.stages, in the same order");
  }
  if ((*windows)->empty() || (*windows)->size() != (*rates)->size()) {
    return Bad("tuner", "needs one planned rate per window, and at least one window");
  }
  AppliedPlan plan;
  for (size_t i = 0; i < (*stages)->size(); ++i) {
    const json& s = (**stages)[i];
    const json& t = (**tuned)[i];
    const std::string where = absl::StrCat("plan.stages[", i, "]");
    const std::string twhere = absl::StrCat("tuner.stages[", i, "]");
    if (!s.is_object()) return Bad(where, "must be an object");
    if (!t.is_object()) return Bad(twhere, "must be an object");
    AppliedStage a;
    TunerStage ts;
    auto vertex = String(s, "stage", where);
    auto hardware = String(s, "hardware", where);
    auto batch = Count(s, "batch", where);
    auto replicas = Count(s, "replicas", where);
    auto tvertex = String(t, "stage", twhere);
    auto mu = Number(t, "mu_qps", twhere);
    auto scale = Number(t, "scale_factor", twhere);
    auto rho = Number(t, "rho", twhere);
    for (const absl::Status& st : {vertex.status(), hardware.status(), batch.status(),
                                   replicas.status(), tvertex.status(), mu.status(),
                                   scale.status(), rho.status()}) {
      if (!st.ok()) return st;
    }
    if (*tvertex != *vertex) {
      return Bad(twhere, absl::StrCat("names stage \"", *tvertex, "\" where plan.stages[", i,
                                      "] names \"", *vertex, "\""));
    }
    if (!(*mu > 0) || !(*rho > 0) || !(*scale >= 0 && *scale <= 1)) {
      return Bad(twhere, "needs mu_qps > 0, rho > 0 and scale_factor in [0,1]");
    }
    if (auto v = s.find("variant"); v != s.end()) {
      auto variant = String(s, "variant", where);
      if (!variant.ok()) return variant.status();
      a.variant = *variant;
    }
    a.vertex = *vertex;
    a.hardware = *hardware;
    a.batch = *batch;
    plan.stages.push_back(std::move(a));
    plan.tuner.stages.push_back({*vertex, *mu, *scale, *rho, *replicas});
  }
  for (size_t i = 0; i < (*windows)->size(); ++i) {
    const json& w = (**windows)[i];
    const json& r = (**rates)[i];
    if (!w.is_number() || !(w.get<double>() > 0) || !r.is_number() || !(r.get<double>() >= 0)) {
      return Bad(absl::StrCat("tuner window ", i),
                 "windows_s must be positive and planned_rates_qps not negative");
    }
    plan.tuner.windows.push_back(FromSeconds(w.get<double>()));
    plan.tuner.planned_rates.push_back(r.get<double>());
  }
  // Optional (plans from before it lack it; the tuner then takes a Poisson
  // count's noise): per window, the busiest count's deviation.
  if (tuner_it->contains("planned_count_deviations")) {
    auto deviations = Array(*tuner_it, "planned_count_deviations", "tuner");
    if (!deviations.ok()) return deviations.status();
    if ((*deviations)->size() != (*windows)->size()) {
      return Bad("tuner.planned_count_deviations", "needs one deviation per window");
    }
    for (const json& d : **deviations) {
      if (!d.is_number() || !(d.get<double>() >= 0) || !std::isfinite(d.get<double>())) {
        return Bad("tuner.planned_count_deviations", "must be numbers, none negative");
      }
      plan.tuner.planned_deviations.push_back(d.get<double>());
    }
  }
  if (!std::is_sorted(plan.tuner.windows.begin(), plan.tuner.windows.end())) {
    return Bad("tuner.windows_s", "must be in increasing order");
  }
  return plan;
}

absl::Status CheckAppliedPlan(AppliedPlan& plan, const ValidatedPipeline& pipeline,
                              const std::vector<std::string>& worker_types) {
  std::set<std::string> seen;
  for (AppliedStage& s : plan.stages) {
    const int32_t v = pipeline.VertexIndex(s.vertex);
    if (v < 0) {
      return Bad(absl::StrCat("stage \"", s.vertex, "\""),
                 absl::StrCat("pipeline \"", pipeline.spec.name, "\" has no such vertex"));
    }
    if (!seen.insert(s.vertex).second) {
      return Bad(absl::StrCat("stage \"", s.vertex, "\""), "is planned twice");
    }
    if (std::find(worker_types.begin(), worker_types.end(), s.hardware) == worker_types.end()) {
      return Bad(absl::StrCat("stage \"", s.vertex, "\""),
                 absl::StrCat("unknown worker type \"", s.hardware, "\"; the server has ",
                              absl::StrJoin(worker_types, ", ")));
    }
    s.model = pipeline.spec.vertices[v].model;
  }
  for (const Vertex& v : pipeline.spec.vertices) {
    if (seen.count(v.name) == 0) {
      return Bad(absl::StrCat("vertex \"", v.name, "\""), "the plan has no stage for it");
    }
  }
  return absl::OkStatus();
}

}  // namespace maitre::pipeline
