// Deleting models and apps (docs/api.md, "Deleting models and apps"): the
// registry rows go in one transaction, the serving catalog forgets them, the
// instances of their variants are unloaded from every worker, and the files
// no remaining model or variant refers to are deleted from the blob store.
//
// Refused with FailedPrecondition (HTTP 409), changing nothing, while a
// registration of the model (or of any model of the app) is under way,
// while a registered pipeline of the app names the model (even with
// `force`: the pipeline would stop serving; its app's deletion takes its
// pipelines with it), and
// while a live offline job uses the model or app unless `force` cancels
// those jobs first: deleting what a job reads from under it would fail the
// job half way with an error that names neither the delete nor its cause.
//
// Thread-safety: thread-safe; the calls are control path (they touch the
// registry and the disk) and one runs at a time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/dataplane/cluster.h"
#include "controller/dataplane/placer.h"
#include "controller/models/catalog.h"
#include "controller/models/registrar.h"
#include "controller/registry/blob_store.h"
#include "controller/registry/registry.h"

namespace maitre::controller {

// What a delete removed, for the response.
struct Removal {
  std::string app;
  bool app_removed = false;
  std::vector<std::string> models;
  std::vector<std::string> variants;   // "model:variant"
  std::vector<std::string> unloaded;   // "worker/model:variant"
  std::vector<std::string> cancelled_jobs;
  int blobs_removed = 0;
  int64_t bytes_freed = 0;
};

class ModelRemover {
 public:
  struct Options {
    registry::Registry* registry = nullptr;
    registry::BlobStore* blobs = nullptr;
    Catalog* catalog = nullptr;
    Cluster* cluster = nullptr;
    Placer* placer = nullptr;
    Registrar* registrar = nullptr;
    // Ids of the live (unfinished) offline jobs of `app` that name `model`
    // or, with model "", of every live job of the app. Null: no jobs.
    std::function<std::vector<std::string>(const std::string& app, const std::string& model)>
        live_jobs;
    // The names of the registered pipelines of `app` that name `model`.
    // Null: no pipelines.
    std::function<std::vector<std::string>(const std::string& app, const std::string& model)>
        pipelines_using;
    // Cancels a job for a forced delete.
    std::function<absl::Status(const std::string& id)> cancel_job;
  };

  explicit ModelRemover(Options options) : options_(std::move(options)) {}

  // NotFound for an unknown app, and for a model that is not the app's.
  absl::StatusOr<Removal> DeleteModel(const std::string& app, const std::string& model,
                                      bool force);
  // The app, its defaults and all its models. NotFound for an unknown app.
  absl::StatusOr<Removal> DeleteApp(const std::string& app, bool force);

 private:
  // 409 unless nothing live uses them; cancels the live jobs when forced.
  absl::Status CheckIdle(const std::string& app, const std::string& model, bool force,
                         Removal& removal);
  // After the rows are gone: forget, unload and collect what `models` had.
  void Release(const std::vector<registry::ModelRecord>& models,
               const std::vector<registry::VariantRecord>& variants, Removal& removal);

  const Options options_;
  absl::Mutex mu_;  // one delete at a time
};

}  // namespace maitre::controller
