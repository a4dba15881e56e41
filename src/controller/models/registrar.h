// Registration (docs/api.md, "Maitre extensions"): checks an uploaded model and
// its validation set, stores the files content-addressed, proves on a worker
// that the model loads and runs (measuring its accuracy there), and only then
// records it in the registry. A rejected upload leaves the registry unchanged.
//
// Thread-safety: thread-safe; Register() is control path and blocks for as
// long as validation takes (seconds for a large model and valset).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/models/catalog.h"
#include "controller/models/part_agreement.h"
#include "controller/dataplane/cluster.h"
#include "controller/registry/blob_store.h"
#include "controller/registry/registry.h"

namespace maitre::controller {

struct Upload {
  std::string app;
  std::string model;
  std::string meta_json;     // required: format, inputs, outputs, optional accuracy
  std::string model_bytes;   // required
  std::string onnx_bytes;    // optional ONNX companion of a TorchScript model
  std::string valset_bytes;  // optional .npz
};

struct RegisteredVariant {
  std::string variant;
  std::string runtime;
  double accuracy = 0;
  std::string accuracy_source;
  std::string state;
};

struct Registration {
  std::string app;
  std::string model;
  bool unchanged = false;  // the same bytes were registered before
  std::vector<RegisteredVariant> variants;
};

// Where a registration is, for progress bars. It ends when the model can
// serve; generating and profiling the other variants continues in the
// background and shows in the variants' states.
struct RegistrationProgress {
  int step = 0;
  int steps = 1;
  std::string phase;   // what is happening now, for people
  bool done = false;
  absl::Status error;  // set when done and it failed
};

class Registrar {
 public:
  struct Options {
    registry::Registry* registry = nullptr;
    registry::BlobStore* blobs = nullptr;
    Catalog* catalog = nullptr;
    Cluster* cluster = nullptr;
    // Batch size used when running the validation set.
    int evaluation_batch = 64;
    // Called after a model is registered (the variant pipeline takes over).
    std::function<void()> on_registered;
    // Held while a worker measures anything (accuracy, profiles), so that
    // two measurements never share the cores and spoil each other.
    absl::Mutex* measurement_mu = nullptr;
    // How closely an ONNX part must match its TorchScript part.
    AgreementOptions agreement;
    // Whether a pipeline holds a name: /v2/models/{name} reaches a model or
    // a pipeline, so a model may not take a pipeline's name (null: none).
    std::function<bool(const std::string& name)> is_pipeline;
  };

  explicit Registrar(Options options) : options_(options) {}

  absl::StatusOr<Registration> Register(const Upload& upload);
  // Records that a registration of upload's app/model is queued (step 0, not
  // done), for a caller that answers before Register runs: a client that
  // asks for the progress at once must find this registration, not nothing
  // or the previous one's end.
  void Queued(const Upload& upload);

  // Creates the app or replaces its default requirements, its
  // max_accuracy_drop and its sl_min, from JSON {"latency_ms",
  // "min_accuracy", "max_cost", "max_accuracy_drop", "sl_min"} (absent or
  // null = none; sl_min in (0, 1]). Returns what was stored.
  absl::StatusOr<registry::AppRecord> SetAppDefaults(const std::string& app,
                                                     absl::string_view json);

  // Imports a profile CSV (docs/api.md, "Files") for registered variants, all
  // or nothing; returns how many (variant, worker type) profiles were stored.
  absl::StatusOr<int> ImportProfiles(absl::string_view csv);

  // Whether a registration of app/model (model "": any model of app) is
  // queued or under way.
  bool Registering(const std::string& app, const std::string& model) const;

  // The progress of the latest registration of app/model; NotFound if none
  // happened since the server started.
  absl::StatusOr<RegistrationProgress> Progress(const std::string& app,
                                                const std::string& model) const;

 private:
  void SetProgress(const Upload& upload, int step, int steps, std::string phase);
  absl::StatusOr<Registration> RegisterLocked(const Upload& upload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The worker that should run a validation, or an error if there is none.
  absl::StatusOr<std::shared_ptr<WorkerApi>> ValidationWorker() const;
  // Loads and runs `spec` on a worker; returns accuracy when a valset blob
  // is given. Worker-side load errors come back as InvalidArgument.
  absl::StatusOr<double> Validate(const VariantSpec& spec, const std::string& valset_blob);
  // Runs both parts on the same rows on a worker; InvalidArgument when the
  // ONNX part is not the same model (controller/models/part_agreement.h).
  absl::Status CheckSameModel(const ModelSpec& spec, const Valset* valset,
                              const VariantSpec& torch, const VariantSpec& onnx);

  const Options options_;
  absl::Mutex mu_;  // one registration at a time keeps idempotency checks simple
  mutable absl::Mutex progress_mu_;
  std::map<std::string, RegistrationProgress> progress_ ABSL_GUARDED_BY(progress_mu_);
};

}  // namespace maitre::controller
