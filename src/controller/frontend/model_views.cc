#include "controller/frontend/model_views.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "controller/pipelines/pipeline_book.h"

namespace maitre::controller {

ModelRef ParseModelRef(const std::string& name, const std::string& version) {
  ModelRef ref{name, ""};
  if (auto key = VariantKey::Parse(name)) {
    ref.model = key->model;
    ref.variant = key->variant;
  }
  if (!version.empty()) ref.variant = version;
  return ref;
}

absl::Status UnknownModelError(absl::string_view name) {
  return absl::NotFoundError(
      absl::StrCat("no model named '", name, "' is registered; GET /v2/apps lists them"));
}

absl::Status UnknownVariantError(const CatalogModel& model, absl::string_view variant) {
  std::string known;
  for (const CatalogVariant& v : model.variants) absl::StrAppend(&known, " ", v.spec.key.variant);
  return absl::NotFoundError(
      absl::StrCat("model '", model.name, "' has no variant '", variant, "'; it has:", known));
}

absl::StatusOr<ModelMetadata> DescribeModel(const CatalogSnapshot& catalog, const ModelRef& ref) {
  const CatalogModel* model = catalog.FindModel(ref.model);
  if (model == nullptr) return UnknownModelError(ref.model);
  if (!ref.variant.empty() && model->FindVariant(ref.variant) == nullptr) {
    return UnknownVariantError(*model, ref.variant);
  }
  ModelMetadata m;
  m.name = model->name;
  for (const CatalogVariant& v : model->variants) m.versions.push_back(v.spec.key.variant);
  m.platform = model->spec.format == ModelFormat::kOnnx ? "onnx" : "pytorch_torchscript";
  m.inputs = model->spec.inputs;
  m.outputs = model->spec.outputs;
  return m;
}

absl::StatusOr<Readiness> ModelReadiness(const CatalogSnapshot& catalog, const Cluster& cluster,
                                         const ModelRef& ref) {
  const CatalogModel* model = catalog.FindModel(ref.model);
  if (model == nullptr) return UnknownModelError(ref.model);
  const CatalogVariant* variant =
      ref.variant.empty() ? model->DefaultVariant() : model->FindVariant(ref.variant);
  if (!ref.variant.empty() && variant == nullptr) return UnknownVariantError(*model, ref.variant);
  if (variant == nullptr || !variant->ready()) {
    return Readiness{false, "no variant of the model is ready yet"};
  }
  if (cluster.worker_count() == 0) return Readiness{false, "no worker has joined yet"};
  return Readiness{true, ""};
}

namespace {

absl::Status StalePipelineError(const ServedPipeline& pipeline) {
  return absl::FailedPreconditionError(absl::StrCat(
      "pipeline '", pipeline.name, "' no longer validates (", pipeline.error,
      "); register it again"));
}

}  // namespace

absl::StatusOr<ModelMetadata> DescribePipeline(const ServedPipeline& pipeline) {
  if (pipeline.validated == nullptr) return StalePipelineError(pipeline);
  ModelMetadata m;
  m.name = pipeline.name;
  m.platform = "maitre-pipeline";
  m.inputs = pipeline.validated->inputs;
  for (const auto& [name, spec] : pipeline.validated->outputs) {
    m.outputs.push_back(spec);
    m.outputs.back().name = name;
  }
  return m;
}

absl::StatusOr<Readiness> PipelineReadiness(const CatalogSnapshot& catalog,
                                            const Cluster& cluster,
                                            const ServedPipeline& pipeline) {
  if (pipeline.validated == nullptr) return StalePipelineError(pipeline);
  std::set<std::string> checked;
  for (const pipeline::Vertex& v : pipeline.validated->spec.vertices) {
    if (!checked.insert(v.model).second) continue;
    absl::StatusOr<Readiness> stage =
        ModelReadiness(catalog, cluster, {v.model, PlannedVariant(pipeline, v.model)});
    if (!stage.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pipeline '", pipeline.name, "', stage ", v.name, ": ", stage.status().message()));
    }
    if (!stage->ready) {
      return Readiness{false, absl::StrCat("stage ", v.name, " (", v.model, "): ", stage->reason)};
    }
  }
  return Readiness{true, ""};
}

}  // namespace maitre::controller
