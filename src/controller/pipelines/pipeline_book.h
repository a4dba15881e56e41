// The controller's registered pipelines (docs/pipelines.md, "Serving a
// pipeline"): each validated against its app's registered models when it
// is registered, kept in the registry (registry/pipeline_store.h) and read
// back, and validated again, at start-up.
//
// A pipeline belongs to one app and may only name that app's models. Its
// name shares the namespace of model names, since /v2/models/{name}/infer
// reaches either: a name a model holds, or another app's pipeline holds,
// is refused (AlreadyExists).
//
// Errors: InvalidArgument for a spec that does not parse or validate (the
// message names the vertex, edge or output at fault, pipeline/spec.h),
// NotFound for an unknown app or pipeline, AlreadyExists for a taken name.
//
// Thread-safety: thread-safe. Lookups share a mutex with the rare writes;
// what they return is immutable.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/models/catalog.h"
#include "controller/pipelines/arrival_log.h"
#include "controller/pipelines/stage_rows.h"
#include "controller/registry/pipeline_store.h"
#include "pipeline/applied_plan.h"
#include "pipeline/spec.h"

namespace maitre::controller {

struct ServedPipeline {
  std::string name;
  std::string app;
  std::string spec_json;  // as registered
  int64_t created_unix_ms = 0;
  // Null when the stored spec no longer validates against the app's models
  // (one was deleted or re-registered with other tensors); `error` says why,
  // and queries are refused with it until the pipeline is registered again.
  std::shared_ptr<const pipeline::ValidatedPipeline> validated;
  std::string error;
  // The plan last applied (PUT .../plan; docs/api.md, "Pipelines"), which
  // the control plane provisions and tunes; null for none. `plan_json` is
  // as the client sent it; `plan_error` says why a stored plan no longer
  // fits the pipeline (then `plan` is null).
  std::shared_ptr<const pipeline::AppliedPlan> plan;
  std::string plan_json;
  std::string plan_error;
  // Unique to each application of a plan in this process: a new one starts
  // the tuner over.
  int64_t plan_id = 0;
  // The pipeline's arrivals for the tuner; set while it has a plan.
  std::shared_ptr<ArrivalLog> arrivals;
  // The rows each stage ran on, for the measured scale factors and branch
  // probabilities; kept while the spec is (a new plan keeps them).
  std::shared_ptr<StageRows> stage_rows = std::make_shared<StageRows>();
};

// The variant `pipeline`'s applied plan puts `model`'s stage on, which its
// stage queries are sent to; empty when it has no plan or names none (the
// first stage of the model, if several vertices share it).
std::string PlannedVariant(const ServedPipeline& pipeline, const std::string& model);

class PipelineBook {
 public:
  struct Options {
    registry::PipelineStore* store = nullptr;
    Catalog* catalog = nullptr;
    // Wall-clock milliseconds for a new record's creation time.
    std::function<int64_t()> now_unix_ms;
    // The server's worker types, which a plan's stages must name.
    std::vector<std::string> worker_types;
    // Told of each plan once applied, and of each one removed with its
    // pipeline (a replaced spec, a deleted pipeline or app), outside the
    // book's lock, so that the instances already serving its stages take
    // the batches in force now (PlannedBatch): the new plan's, or no cap.
    std::function<void(std::shared_ptr<const pipeline::AppliedPlan>)> plan_changed = nullptr;
  };
  explicit PipelineBook(Options options);


  // Reads every stored pipeline and validates it against the catalog;
  // returns how many no longer validate (kept, with their error).
  int Load();

  struct Put {
    std::shared_ptr<const ServedPipeline> pipeline;
    bool created = false;  // false: an existing pipeline was replaced
  };
  // Registers (or replaces) pipeline `name` of `app` from its JSON spec. The
  // spec's "name", when given, must be `name`.
  absl::StatusOr<Put> Register(const std::string& app, const std::string& name,
                               const std::string& spec_json);

  // Null when no pipeline has this name.
  std::shared_ptr<const ServedPipeline> Find(absl::string_view name) const;
  // The pipelines of `app` ("" for every app), by name.
  std::vector<std::shared_ptr<const ServedPipeline>> List(absl::string_view app) const;
  absl::Status Delete(const std::string& app, const std::string& name);
  // Checks `plan_json` (pipeline/applied_plan.h) against pipeline `name` of
  // `app` and the worker types, keeps it in the registry and
  // makes it the pipeline's plan. NotFound for an unknown pipeline,
  // FailedPrecondition for one that no longer validates, InvalidArgument
  // for a plan that does not parse or fit.
  absl::StatusOr<std::shared_ptr<const ServedPipeline>> ApplyPlan(
      const std::string& app, const std::string& name, const std::string& plan_json);
  // The batch the applied plans set for `key`: the smallest planned batch
  // of the stages planned on that variant (docs/pipelines.md, "Applying a
  // plan"); 0 when none is.
  int32_t PlannedBatch(const VariantKey& key) const;
  // The names of `app`'s pipelines whose spec names `model`.
  std::vector<std::string> PipelinesUsing(const std::string& app, const std::string& model) const;
  // Forgets every pipeline of a deleted app; returns how many.
  absl::StatusOr<int> DeleteApp(const std::string& app);

 private:
  // The spec validated against `app`'s models in the current catalog.
  absl::StatusOr<pipeline::ValidatedPipeline> Validate(const std::string& app,
                                                       const std::string& name,
                                                       const std::string& spec_json) const;

  // Register's work, under the lock: a plan it removes (made for the spec
  // it replaces) is added to `removed`, to be told of once the lock is off.
  absl::StatusOr<Put> PutSpec(
      const std::string& app, const std::string& name, const std::string& spec_json,
      std::vector<std::shared_ptr<const pipeline::AppliedPlan>>& removed)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Tells options_.plan_changed of each plan; called outside the lock.
  void PlansChanged(const std::vector<std::shared_ptr<const pipeline::AppliedPlan>>& plans) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // `served` with `plan_json` as its plan, or why it does not fit.
  absl::Status AttachPlan(ServedPipeline& served, const std::string& plan_json)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  int64_t next_plan_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::shared_ptr<const ServedPipeline>, std::less<>> pipelines_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
