// The answers both front-ends give about models (metadata, readiness),
// computed once from a catalog snapshot and the cluster, so HTTP and gRPC
// cannot drift apart.
//
// Thread-safety: pure functions over immutable snapshots.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"

namespace maitre::controller {

struct ServedPipeline;  // controller/pipelines/pipeline_book.h

// What a request path or RPC names: "model", "model:variant", and an
// optional separate version (which also names a variant).
struct ModelRef {
  std::string model;
  std::string variant;  // empty: Maitre chooses
};
ModelRef ParseModelRef(const std::string& name, const std::string& version);

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // the variants
  std::string platform;               // "pytorch_torchscript" | "onnx"
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// NotFound naming what is registered when the model or variant is unknown.
absl::StatusOr<ModelMetadata> DescribeModel(const CatalogSnapshot& catalog, const ModelRef& ref);

struct Readiness {
  bool ready = false;
  std::string reason;  // why not, for people
};
absl::StatusOr<Readiness> ModelReadiness(const CatalogSnapshot& catalog, const Cluster& cluster,
                                         const ModelRef& ref);

// A pipeline reached as a model is (docs/pipelines.md, "Serving a
// pipeline"): metadata with platform "maitre-pipeline", no versions, the
// pipeline's inputs and outputs; ready when every stage's model is, on the
// variant its applied plan names. FailedPrecondition for a pipeline whose
// stored spec no longer validates.
absl::StatusOr<ModelMetadata> DescribePipeline(const ServedPipeline& pipeline);
absl::StatusOr<Readiness> PipelineReadiness(const CatalogSnapshot& catalog,
                                            const Cluster& cluster,
                                            const ServedPipeline& pipeline);

absl::Status UnknownModelError(absl::string_view name);
absl::Status UnknownVariantError(const CatalogModel& model, absl::string_view variant);

}  // namespace maitre::controller
