#include "controller/models/model_removal.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/logging.h"
#include "core/status_macros.h"

namespace maitre::controller {

absl::Status ModelRemover::CheckIdle(const std::string& app, const std::string& model,
                                     bool force, Removal& removal) {
  if (options_.registrar != nullptr && options_.registrar->Registering(app, model)) {
    return absl::FailedPreconditionError(absl::StrCat(
        model.empty() ? absl::StrCat("a model of app '", app, "'")
                      : absl::StrCat("model '", model, "'"),
        " is being registered; delete once the registration has ended (GET /v2/apps/", app,
        "/models/{model}/registration shows it)"));
  }
  if (!model.empty() && options_.pipelines_using) {
    std::vector<std::string> users = options_.pipelines_using(app, model);
    if (!users.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", model, "' is used by pipeline(s) ", absl::StrJoin(users, ", "),
          " of app '", app, "'; delete them first (DELETE /v2/apps/", app,
          "/pipelines/{pipeline})"));
    }
  }
  if (!options_.live_jobs) return absl::OkStatus();
  std::vector<std::string> jobs = options_.live_jobs(app, model);
  if (jobs.empty()) return absl::OkStatus();
  if (!force) {
    return absl::FailedPreconditionError(absl::StrCat(
        "offline job(s) ", absl::StrJoin(jobs, ", "), " still use ",
        model.empty() ? absl::StrCat("app '", app, "'") : absl::StrCat("model '", model, "'"),
        "; cancel them first, or delete with ?force=true to cancel them"));
  }
  for (const std::string& id : jobs) {
    absl::Status cancelled = options_.cancel_job ? options_.cancel_job(id)
                                                 : absl::UnimplementedError("no job runner");
    // A job that finished meanwhile is no longer in the way.
    if (!cancelled.ok() && !absl::IsFailedPrecondition(cancelled) && !absl::IsNotFound(cancelled)) {
      return absl::Status(cancelled.code(),
                          absl::StrCat("cancelling job ", id, ": ", cancelled.message()));
    }
    removal.cancelled_jobs.push_back(id);
  }
  return absl::OkStatus();
}

void ModelRemover::Release(const std::vector<registry::ModelRecord>& models,
                           const std::vector<registry::VariantRecord>& variants,
                           Removal& removal) {
  // The catalog first, so that no new query or autoscaling decision picks
  // a variant that is being unloaded.
  absl::Status reloaded = options_.catalog->Reload(*options_.registry);
  if (!reloaded.ok()) spdlog::error("deleting: reloading the catalog: {}", reloaded.message());

  std::set<std::string> gone;
  for (const registry::ModelRecord& m : models) gone.insert(m.name);
  if (options_.cluster != nullptr && options_.placer != nullptr) {
    for (const WorkerView& w : options_.cluster->Snapshot()) {
      for (const InstanceView& i : w.instances) {
        if (gone.count(i.key.model) == 0 || i.phase == InstancePhase::kUnloading) continue;
        // Queries in flight there are answered first (Placer::Unload).
        options_.placer->Unload(w.id, i.key);
        removal.unloaded.push_back(absl::StrCat(w.id, "/", i.key.ToString()));
      }
    }
  }

  // Only the deleted models' files are candidates: a file stored by a
  // registration under way is referenced by nothing yet and must stay.
  std::set<std::string> candidates;
  for (const registry::ModelRecord& m : models) {
    candidates.insert({m.source_blob, m.onnx_blob, m.valset_blob});
  }
  for (const registry::VariantRecord& v : variants) candidates.insert(v.blob);
  const std::set<std::string> referenced = options_.registry->ReferencedBlobs();
  for (const std::string& blob : candidates) {
    if (blob.empty() || referenced.count(blob) > 0) continue;
    absl::StatusOr<int64_t> size = options_.blobs->Size(blob);
    absl::Status removed = options_.blobs->Remove(blob);
    if (!removed.ok()) {
      spdlog::warn("deleting: removing blob {}: {}", blob, removed.message());
      continue;
    }
    ++removal.blobs_removed;
    if (size.ok()) removal.bytes_freed += *size;
  }
}

absl::StatusOr<Removal> ModelRemover::DeleteModel(const std::string& app,
                                                  const std::string& model, bool force) {
  absl::MutexLock lock(&mu_);
  MAITRE_RETURN_IF_ERROR(options_.registry->GetApp(app).status());
  absl::StatusOr<registry::ModelRecord> record = options_.registry->GetModel(model);
  // Another app's model is as unknown here as one that does not exist.
  if (!record.ok() || record->app != app) {
    if (record.ok() || absl::IsNotFound(record.status())) {
      return absl::NotFoundError(absl::StrCat("app '", app, "' has no model '", model, "'"));
    }
    return record.status();
  }
  Removal removal;
  removal.app = app;
  MAITRE_RETURN_IF_ERROR(CheckIdle(app, model, force, removal));
  std::vector<registry::VariantRecord> variants = options_.registry->ListVariants(model);
  MAITRE_RETURN_IF_ERROR(options_.registry->DeleteModel(model));
  removal.models.push_back(model);
  for (const registry::VariantRecord& v : variants) removal.variants.push_back(v.key.ToString());
  Release({*record}, variants, removal);
  spdlog::info("deleted model {} of app {}: {} variant(s), {} instance(s) unloaded, {} blob(s) "
               "removed",
               model, app, variants.size(), removal.unloaded.size(), removal.blobs_removed);
  return removal;
}

absl::StatusOr<Removal> ModelRemover::DeleteApp(const std::string& app, bool force) {
  absl::MutexLock lock(&mu_);
  MAITRE_RETURN_IF_ERROR(options_.registry->GetApp(app).status());
  Removal removal;
  removal.app = app;
  MAITRE_RETURN_IF_ERROR(CheckIdle(app, "", force, removal));
  std::vector<registry::ModelRecord> models = options_.registry->ListModels(app);
  std::vector<registry::VariantRecord> variants;
  for (const registry::ModelRecord& m : models) {
    for (registry::VariantRecord& v : options_.registry->ListVariants(m.name)) {
      variants.push_back(std::move(v));
    }
  }
  MAITRE_RETURN_IF_ERROR(options_.registry->DeleteApp(app));
  removal.app_removed = true;
  for (const registry::ModelRecord& m : models) removal.models.push_back(m.name);
  for (const registry::VariantRecord& v : variants) removal.variants.push_back(v.key.ToString());
  Release(models, variants, removal);
  spdlog::info("deleted app {}: {} model(s), {} instance(s) unloaded, {} blob(s) removed", app,
               models.size(), removal.unloaded.size(), removal.blobs_removed);
  return removal;
}

}  // namespace maitre::controller
