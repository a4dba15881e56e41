#include "controller/pipelines/pipeline_book.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/registry/validation.h"
#include "core/status_macros.h"

namespace maitre::controller {

PipelineBook::PipelineBook(Options options) : options_(std::move(options)) {}

absl::StatusOr<pipeline::ValidatedPipeline> PipelineBook::Validate(
    const std::string& app, const std::string& name, const std::string& spec_json) const {
  // The name comes from the request's path and shares /v2/models/{name}
  // with model names: the same rules.
  MAITRE_RETURN_IF_ERROR(registry::ValidateName("pipeline name", name));
  MAITRE_ASSIGN_OR_RETURN(pipeline::PipelineSpec spec,
                          pipeline::ParsePipelineSpecJson(spec_json));
  if (spec.name.empty()) spec.name = name;
  if (spec.name != name) {
    return absl::InvalidArgumentError(absl::StrCat("the spec names pipeline \"", spec.name,
                                                   "\" but the path names \"", name, "\""));
  }
  auto catalog = options_.catalog->Get();
  const CatalogApp* owner = catalog->FindApp(app);
  if (owner == nullptr) {
    return absl::NotFoundError(absl::StrCat("no app named '", app,
                                            "'; register its models before its pipelines"));
  }
  if (catalog->FindModel(name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat(
        "'", name, "' names a model; a pipeline needs a name no model holds, as "
        "/v2/models/{name} reaches either"));
  }
  // Only the app's own models: a pipeline belongs to its app.
  std::map<std::string, ModelSpec> models;
  for (const std::string& model : owner->models) {
    if (const CatalogModel* m = catalog->FindModel(model); m != nullptr) models[model] = m->spec;
  }
  return pipeline::ValidatePipeline(std::move(spec), models);
}

int PipelineBook::Load() {
  int broken = 0;
  std::map<std::string, std::shared_ptr<const ServedPipeline>, std::less<>> loaded;
  for (registry::PipelineRecord& record : options_.store->ListPipelines()) {
    auto served = std::make_shared<ServedPipeline>();
    served->name = record.name;
    served->app = record.app;
    served->spec_json = std::move(record.spec_json);
    served->created_unix_ms = record.created_unix_ms;
    auto validated = Validate(served->app, served->name, served->spec_json);
    if (validated.ok()) {
      served->validated =
          std::make_shared<const pipeline::ValidatedPipeline>(*std::move(validated));
      if (!record.plan_json.empty()) {
        absl::MutexLock lock(&mu_);
        absl::Status fits = AttachPlan(*served, record.plan_json);
        if (!fits.ok()) {
          served->plan_error = std::string(fits.message());
          spdlog::warn("pipeline {}'s plan no longer fits it: {}", served->name,
                       served->plan_error);
        }
      }
    } else {
      ++broken;
      served->error = std::string(validated.status().message());
      spdlog::warn("pipeline {} of app {} no longer validates: {}", served->name, served->app,
                   served->error);
    }
    loaded[served->name] = std::move(served);
  }
  absl::MutexLock lock(&mu_);
  pipelines_ = std::move(loaded);
  return broken;
}

absl::StatusOr<PipelineBook::Put> PipelineBook::Register(const std::string& app,
                                                         const std::string& name,
                                                         const std::string& spec_json) {
  std::vector<std::shared_ptr<const pipeline::AppliedPlan>> removed;
  absl::StatusOr<Put> put = PutSpec(app, name, spec_json, removed);
  PlansChanged(removed);
  return put;
}

absl::StatusOr<PipelineBook::Put> PipelineBook::PutSpec(
    const std::string& app, const std::string& name, const std::string& spec_json,
    std::vector<std::shared_ptr<const pipeline::AppliedPlan>>& removed) {
  // One registration at a time: the name checks and the write go together.
  absl::MutexLock lock(&mu_);
  auto existing = pipelines_.find(name);
  if (existing != pipelines_.end() && existing->second->app != app) {
    return absl::AlreadyExistsError(absl::StrCat("pipeline name '", name, "' is taken by app '",
                                                 existing->second->app, "'"));
  }
  MAITRE_ASSIGN_OR_RETURN(pipeline::ValidatedPipeline validated,
                          Validate(app, name, spec_json));
  auto served = std::make_shared<ServedPipeline>();
  served->name = name;
  served->app = app;
  served->spec_json = spec_json;
  served->created_unix_ms = existing != pipelines_.end() ? existing->second->created_unix_ms
                                                         : options_.now_unix_ms();
  served->validated = std::make_shared<const pipeline::ValidatedPipeline>(std::move(validated));
  MAITRE_RETURN_IF_ERROR(options_.store->PutPipeline(
      registry::PipelineRecord{name, app, spec_json, served->created_unix_ms, /*plan_json=*/""}));
  Put put{served, existing == pipelines_.end()};
  // The plan was made for the spec this one replaces.
  if (existing != pipelines_.end() && existing->second->plan != nullptr) {
    removed.push_back(existing->second->plan);
  }
  pipelines_[name] = std::move(served);
  return put;
}

void PipelineBook::PlansChanged(
    const std::vector<std::shared_ptr<const pipeline::AppliedPlan>>& plans) const {
  if (!options_.plan_changed) return;
  for (const auto& plan : plans) options_.plan_changed(plan);
}

absl::Status PipelineBook::AttachPlan(ServedPipeline& served, const std::string& plan_json) {
  MAITRE_ASSIGN_OR_RETURN(pipeline::AppliedPlan plan, pipeline::ParseAppliedPlanJson(plan_json));
  MAITRE_RETURN_IF_ERROR(
      pipeline::CheckAppliedPlan(plan, *served.validated, options_.worker_types));
  if (options_.catalog != nullptr) {
    const std::shared_ptr<const CatalogSnapshot> catalog = options_.catalog->Get();
    for (const pipeline::AppliedStage& s : plan.stages) {
      const CatalogModel* model = catalog->FindModel(s.model);
      if (!s.variant.empty() && (model == nullptr || model->FindVariant(s.variant) == nullptr)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage \"", s.vertex, "\": model ", s.model, " has no variant \"", s.variant, "\""));
      }
    }
  }
  served.plan = std::make_shared<const pipeline::AppliedPlan>(std::move(plan));
  served.plan_json = plan_json;
  served.plan_error.clear();
  served.plan_id = ++next_plan_id_;
  served.arrivals = std::make_shared<ArrivalLog>();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ServedPipeline>> PipelineBook::ApplyPlan(
    const std::string& app, const std::string& name, const std::string& plan_json) {
  std::shared_ptr<const ServedPipeline> applied;
  {
    absl::MutexLock lock(&mu_);
    auto it = pipelines_.find(name);
    if (it == pipelines_.end() || it->second->app != app) {
      return absl::NotFoundError(absl::StrCat("app '", app, "' has no pipeline named '", name,
                                              "'; GET /v2/apps/", app, "/pipelines lists them"));
    }
    if (it->second->validated == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pipeline '", name, "' no longer validates (", it->second->error,
          "); register it again before planning it"));
    }
    auto served = std::make_shared<ServedPipeline>(*it->second);
    MAITRE_RETURN_IF_ERROR(AttachPlan(*served, plan_json));
    MAITRE_RETURN_IF_ERROR(options_.store->SetPlan(app, name, plan_json));
    it->second = served;
    applied = std::move(served);
  }
  PlansChanged({applied->plan});
  return applied;
}

std::vector<std::string> PipelineBook::PipelinesUsing(const std::string& app,
                                                      const std::string& model) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> users;
  for (const auto& [name, p] : pipelines_) {
    if (p->app != app) continue;
    // A pipeline that no longer validates still names its models: its spec
    // is read again, as it would be when it is registered again.
    auto spec = pipeline::ParsePipelineSpecJson(p->spec_json);
    if (!spec.ok()) continue;
    for (const pipeline::Vertex& v : spec->vertices) {
      if (v.model == model) {
        users.push_back(name);
        break;
      }
    }
  }
  return users;
}

int32_t PipelineBook::PlannedBatch(const VariantKey& key) const {
  absl::MutexLock lock(&mu_);
  int32_t batch = 0;
  for (const auto& [name, p] : pipelines_) {
    if (p->plan == nullptr) continue;
    for (const pipeline::AppliedStage& s : p->plan->stages) {
      if (s.model == key.model && s.variant == key.variant && s.batch > 0) {
        batch = batch == 0 ? s.batch : std::min(batch, s.batch);
      }
    }
  }
  return batch;
}

std::shared_ptr<const ServedPipeline> PipelineBook::Find(absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = pipelines_.find(name);
  return it == pipelines_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const ServedPipeline>> PipelineBook::List(
    absl::string_view app) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ServedPipeline>> out;
  for (const auto& [name, p] : pipelines_) {
    if (app.empty() || p->app == app) out.push_back(p);
  }
  return out;
}

absl::Status PipelineBook::Delete(const std::string& app, const std::string& name) {
  std::vector<std::shared_ptr<const pipeline::AppliedPlan>> removed;
  {
    absl::MutexLock lock(&mu_);
    MAITRE_RETURN_IF_ERROR(options_.store->DeletePipeline(app, name));
    auto it = pipelines_.find(name);
    if (it != pipelines_.end() && it->second->plan != nullptr) removed.push_back(it->second->plan);
    pipelines_.erase(name);
  }
  PlansChanged(removed);
  return absl::OkStatus();
}

absl::StatusOr<int> PipelineBook::DeleteApp(const std::string& app) {
  std::vector<std::shared_ptr<const pipeline::AppliedPlan>> plans;
  int removed = 0;
  {
    absl::MutexLock lock(&mu_);
    MAITRE_ASSIGN_OR_RETURN(removed, options_.store->DeleteAppPipelines(app));
    for (auto it = pipelines_.begin(); it != pipelines_.end();) {
      if (it->second->app != app) {
        ++it;
        continue;
      }
      if (it->second->plan != nullptr) plans.push_back(it->second->plan);
      it = pipelines_.erase(it);
    }
  }
  PlansChanged(plans);
  return removed;
}

std::string PlannedVariant(const ServedPipeline& pipeline, const std::string& model) {
  if (pipeline.plan == nullptr) return "";
  for (const pipeline::AppliedStage& s : pipeline.plan->stages) {
    if (s.model == model) return s.variant;
  }
  return "";
}

}  // namespace maitre::controller
