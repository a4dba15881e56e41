#include "cli/plan_inputs.h"

#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/api_client.h"
#include "core/file_util.h"
#include "core/profile_csv.h"
#include "core/status_macros.h"
#include "pipeline/spec.h"

namespace maitre::cli {
namespace {

using nlohmann::json;

absl::StatusOr<std::map<std::string, ModelSpec>> ReadModels(const std::string& path) {
  MAITRE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": must be a JSON object of model name -> registration meta"));
  }
  std::map<std::string, ModelSpec> models;
  for (auto it = j.begin(); it != j.end(); ++it) {
    auto spec = ParseModelSpecJson(it.value().dump());
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": model \"", it.key(), "\": ", spec.status().message()));
    }
    models[it.key()] = *std::move(spec);
  }
  return models;
}

// Keeps the records of `variant_of`'s variants, by model and worker type.
void KeepChosen(const std::vector<ProfileRecord>& records, PlanInputs& inputs) {
  for (const ProfileRecord& r : records) {
    auto chosen = inputs.variant_of.find(r.key.model);
    if (chosen != inputs.variant_of.end() && chosen->second == r.key.variant) {
      inputs.profiles[r.key.model][r.worker_type] = r.profile;
    }
  }
}

// The variant each stage of an applied plan names, by model.
std::map<std::string, std::string> PlannedVariants(const json& pipeline,
                                                   const pipeline::PipelineSpec& spec) {
  std::map<std::string, std::string> planned;
  const json* stages = nullptr;
  if (pipeline.contains("plan") && pipeline["plan"].is_object() &&
      pipeline["plan"].contains("plan") && pipeline["plan"]["plan"].is_object()) {
    const json& plan = pipeline["plan"]["plan"];
    if (plan.contains("stages") && plan["stages"].is_array()) stages = &plan["stages"];
  }
  if (stages == nullptr) return planned;
  for (const json& s : *stages) {
    if (!s.is_object() || !s.contains("variant") || !s["variant"].is_string()) continue;
    for (const pipeline::Vertex& v : spec.vertices) {
      if (v.name == s.value("stage", "")) planned[v.model] = s["variant"].get<std::string>();
    }
  }
  return planned;
}

}  // namespace

absl::StatusOr<PlanInputs> PlanInputsFromFiles(const std::string& spec_path,
                                               const std::string& models_path,
                                               const std::string& profiles_path) {
  PlanInputs inputs;
  MAITRE_ASSIGN_OR_RETURN(inputs.spec_json, ReadFileToString(spec_path));
  MAITRE_ASSIGN_OR_RETURN(inputs.models, ReadModels(models_path));
  MAITRE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(profiles_path));
  auto records = ParseProfileCsv(text);
  if (!records.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(profiles_path, ": ",
                                                   records.status().message()));
  }
  // The planner chooses hardware, not variants: the file names one each.
  for (const ProfileRecord& r : *records) {
    auto [it, fresh] = inputs.variant_of.emplace(r.key.model, r.key.variant);
    if (!fresh && it->second != r.key.variant) {
      return absl::InvalidArgumentError(absl::StrCat(
          profiles_path, ": model \"", r.key.model, "\" has profiles for variants \"",
          it->second, "\" and \"", r.key.variant, "\"; keep one per model"));
    }
  }
  KeepChosen(*records, inputs);
  return inputs;
}

absl::StatusOr<PlanInputs> PlanInputsFromServer(const std::string& url, const std::string& app,
                                                const std::string& pipeline_name,
                                                const std::map<std::string, std::string>& variants) {
  MAITRE_ASSIGN_OR_RETURN(ApiClient api, ApiClient::Connect(url));
  auto served = api.Get(absl::StrCat("/v2/apps/", app, "/pipelines/", pipeline_name));
  if (!served.ok()) {
    return absl::Status(served.status().code(),
                        absl::StrCat("pipeline ", pipeline_name, " of app ", app, " at ", url,
                                     ": ", served.status().message()));
  }
  if (!served->value("ready", false)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pipeline ", pipeline_name, " is not servable: ", served->value("error", "")));
  }
  PlanInputs inputs;
  inputs.spec_json = (*served)["spec"].dump();
  MAITRE_ASSIGN_OR_RETURN(pipeline::PipelineSpec spec,
                          pipeline::ParsePipelineSpecJson(inputs.spec_json));

  // Each model's inputs and outputs, as its metadata shows them.
  std::set<std::string> models;
  for (const pipeline::Vertex& v : spec.vertices) models.insert(v.model);
  for (const auto& [model, variant] : variants) {
    if (models.count(model) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--variant ", model, "=", variant,
                                                     ": the pipeline has no stage of model ",
                                                     model));
    }
  }
  for (const std::string& model : models) {
    MAITRE_ASSIGN_OR_RETURN(json metadata, api.Get(absl::StrCat("/v2/models/", model)));
    json meta = {{"inputs", metadata.value("inputs", json::array())},
                 {"outputs", metadata.value("outputs", json::array())}};
    auto parsed = ParseModelSpecJson(meta.dump());
    if (!parsed.ok()) {
      return absl::InternalError(absl::StrCat("model ", model, "'s metadata from ", url, ": ",
                                              parsed.status().message()));
    }
    inputs.models[model] = *std::move(parsed);
  }

  // The app's profiles, one variant per model.
  MAITRE_ASSIGN_OR_RETURN(http::Response csv,
                          api.Send("GET", absl::StrCat("/v2/profiles?app=", app), "", ""));
  if (csv.status != 200) {
    return absl::FailedPreconditionError(
        absl::StrCat("the profiles of app ", app, ": HTTP ", csv.status, ": ", csv.body));
  }
  MAITRE_ASSIGN_OR_RETURN(std::vector<ProfileRecord> records, ParseProfileCsv(csv.body));
  std::map<std::string, std::set<std::string>> profiled;
  for (const ProfileRecord& r : records) {
    if (models.count(r.key.model) > 0) profiled[r.key.model].insert(r.key.variant);
  }
  const std::map<std::string, std::string> planned = PlannedVariants(*served, spec);
  for (const std::string& model : models) {
    const std::set<std::string>& have = profiled[model];
    if (have.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model ", model, " has no profile on the server yet; plan once it is profiled"));
    }
    std::string variant;
    if (auto named = variants.find(model); named != variants.end()) {
      variant = named->second;
    } else if (auto p = planned.find(model); p != planned.end()) {
      variant = p->second;
    } else if (have.size() == 1) {
      variant = *have.begin();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", model, " is profiled as variants ", absl::StrJoin(have, ", "),
          "; name the one to plan with --variant ", model, "=VARIANT"));
    }
    if (have.count(variant) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("model ", model, " has no profiled variant \"",
                                                     variant, "\" (profiled: ",
                                                     absl::StrJoin(have, ", "), ")"));
    }
    inputs.variant_of[model] = variant;
  }
  KeepChosen(records, inputs);

  // The branch probabilities and the serving path measured on served
  // queries.
  const json& measured = (*served)["measured"];
  if (!measured.is_object()) return inputs;
  if (measured.contains("branches") && measured["branches"].is_object()) {
    for (auto it = measured["branches"].begin(); it != measured["branches"].end(); ++it) {
      if (it.value().is_number()) inputs.branches[it.key()] = it.value().get<double>();
    }
  }
  if (measured.contains("stage_overhead_ms") && measured["stage_overhead_ms"].is_number()) {
    inputs.stage_overhead_ms = measured["stage_overhead_ms"].get<double>();
    inputs.overhead_queries = measured.value("stage_overhead_queries", int64_t{0});
  }
  return inputs;
}

}  // namespace maitre::cli
