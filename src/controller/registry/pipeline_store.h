// The durable records of pipelines (docs/pipelines.md, "Serving a
// pipeline"): the `pipelines` table of the registry's SQLite file (schema
// migration 7). A record keeps the spec as the client sent it (JSON); the
// controller validates it against the registered models when it is
// registered and again when it is read back at start-up, so a record never
// has to change when a model it names is re-registered.
//
// Pipeline names share the namespace of model names, as /v2/models/{name}
// reaches either; the registry keys pipelines by name alone. The store
// does not look at models: the controller refuses a name a model holds.
//
// Errors: InvalidArgument for a malformed record, AlreadyExists for a name
// another app's pipeline holds, NotFound for an unknown pipeline,
// Unavailable when another process holds the file's lock too long.
//
// Thread-safety: thread-safe; shares the registry's connection and mutex,
// as KeyStore does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace maitre::registry {

class Connection;

struct PipelineRecord {
  std::string name;
  std::string app;
  std::string spec_json;  // as registered
  int64_t created_unix_ms = 0;
  // The plan last applied (JSON as the client sent it; schema migration 9);
  // empty for none.
  std::string plan_json;
};

class PipelineStore {
 public:
  // Works on `db` under `mu`, which guards it; both belong to the Registry
  // that creates the store and outlive it.
  PipelineStore(absl::Mutex* mu, Connection* db);

  PipelineStore(const PipelineStore&) = delete;
  PipelineStore& operator=(const PipelineStore&) = delete;

  // Creates or replaces the pipeline `record.name` of `record.app`. A name
  // held by another app's pipeline is AlreadyExists. A replaced record
  // keeps its creation time and loses its plan, made for the spec replaced.
  // `record.plan_json` is not written: SetPlan does that.
  absl::Status PutPipeline(const PipelineRecord& record);
  // Every pipeline by name. No error channel, like the registry's List*
  // calls: a failed read logs and returns what was read.
  std::vector<PipelineRecord> ListPipelines() const;
  absl::Status DeletePipeline(absl::string_view app, absl::string_view name);
  // Keeps `plan_json` as the plan of pipeline `name` of `app` (empty
  // forgets it); NotFound for an unknown pipeline.
  absl::Status SetPlan(absl::string_view app, absl::string_view name,
                       absl::string_view plan_json);
  // Deletes every pipeline of `app` (the app itself was deleted); returns
  // how many.
  absl::StatusOr<int> DeleteAppPipelines(absl::string_view app);

 private:
  absl::Mutex* const mu_;
  Connection* const db_;
};

}  // namespace maitre::registry
