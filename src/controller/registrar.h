// Registration (DESIGN §3): checks an uploaded model and its validation set,
// stores the files content-addressed, proves on a worker that the model
// loads and runs (measuring its accuracy there), and only then records it
// in the registry. A rejected upload leaves the registry unchanged.
//
// Thread-safety: thread-safe; Register() is control path and blocks for as
// long as validation takes (seconds for a large model and valset).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/catalog.h"
#include "controller/cluster.h"
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

class Registrar {
 public:
  struct Options {
    registry::Registry* registry = nullptr;
    registry::BlobStore* blobs = nullptr;
    Catalog* catalog = nullptr;
    Cluster* cluster = nullptr;
    // Batch size used when running the validation set.
    int evaluation_batch = 64;
  };

  explicit Registrar(Options options) : options_(options) {}

  absl::StatusOr<Registration> Register(const Upload& upload);

 private:
  // The worker that should run a validation, or an error if there is none.
  absl::StatusOr<std::shared_ptr<WorkerApi>> ValidationWorker() const;
  // Loads and runs `spec` on a worker; returns accuracy when a valset blob
  // is given. Worker-side load errors come back as InvalidArgument.
  absl::StatusOr<double> Validate(const VariantSpec& spec, const std::string& valset_blob);

  const Options options_;
  absl::Mutex mu_;  // one registration at a time keeps idempotency checks simple
};

}  // namespace maitre::controller
