// Where `maitre plan` (plan_command.h) gets what it plans from: the
// pipeline's spec, its models' registration meta, one profiled variant per
// model, and the branch probabilities of its conditional edges. Either from
// files, or from a running server (docs/pipelines.md, "maitre plan"): the
// spec as registered, each model's metadata, the app's profile CSV, and the
// branch probabilities and serving path per stage the server measured on
// served queries.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model_spec.h"
#include "core/profile.h"

namespace maitre::cli {

struct PlanInputs {
  std::string spec_json;
  std::map<std::string, ModelSpec> models;
  // Model -> worker type -> profile, of one variant per model.
  std::map<std::string, std::map<std::string, Profile>> profiles;
  std::map<std::string, std::string> variant_of;  // model -> that variant
  // "from->to" -> probability; from a server, what it measured (empty
  // until it has served the pipeline).
  std::map<std::string, double> branches;
  // From a server: the serving path per stage it measured on answered
  // queries, and over how many (unset until it has enough).
  std::optional<double> stage_overhead_ms;
  int64_t overhead_queries = 0;
};

// From files: the spec (JSON), the models' meta (a JSON object of model
// name -> registration meta) and a profile CSV of one variant per model.
absl::StatusOr<PlanInputs> PlanInputsFromFiles(const std::string& spec_path,
                                               const std::string& models_path,
                                               const std::string& profiles_path);

// From the server at `url`: pipeline `pipeline` of `app`. Each model is
// planned on the variant `variants` names ("model" -> "variant"), else on
// the one the pipeline's applied plan names, else on its only profiled
// variant; a model with several and no choice is an error that lists them.
absl::StatusOr<PlanInputs> PlanInputsFromServer(const std::string& url, const std::string& app,
                                                const std::string& pipeline,
                                                const std::map<std::string, std::string>& variants);

}  // namespace maitre::cli
