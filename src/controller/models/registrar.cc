#include "controller/models/registrar.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/profile_csv.h"
#include "core/sha256.h"
#include "core/status_macros.h"
#include "controller/models/part_agreement.h"
#include "controller/registry/validation.h"
#include "core/valset.h"
#include "core/logging.h"

namespace maitre::controller {
namespace {

// A TorchScript archive is a zip file; anything else cannot be one.
bool LooksLikeZip(absl::string_view bytes) { return absl::StartsWith(bytes, "PK\x03\x04"); }

// An ONNX file is a protobuf ModelProto. Its first field is almost always
// ir_version (field 1, varint: byte 0x08); a text file starts otherwise.
bool LooksLikeOnnx(absl::string_view bytes) {
  return !bytes.empty() && (bytes[0] == 0x08 || bytes[0] == 0x0a || bytes[0] == 0x12);
}

Registration Summarise(const registry::ModelRecord& model,
                       const std::vector<registry::VariantRecord>& variants, bool unchanged) {
  Registration r;
  r.app = model.app;
  r.model = model.name;
  r.unchanged = unchanged;
  for (const registry::VariantRecord& v : variants) {
    r.variants.push_back({v.key.variant, std::string(RuntimeName(v.runtime)), v.accuracy,
                          std::string(AccuracySourceName(v.accuracy_source)),
                          std::string(registry::VariantStateName(v.state))});
  }
  return r;
}

}  // namespace

absl::StatusOr<std::shared_ptr<WorkerApi>> Registrar::ValidationWorker() const {
  // The least busy worker, so validation disturbs serving the least.
  std::string best;
  double best_utilisation = 2;
  for (const WorkerView& w : options_.cluster->Snapshot()) {
    if (w.cpu_utilisation < best_utilisation) {
      best_utilisation = w.cpu_utilisation;
      best = w.id;
    }
  }
  std::shared_ptr<WorkerApi> api = best.empty() ? nullptr : options_.cluster->Api(best);
  if (api == nullptr) {
    return absl::UnavailableError(
        "no worker is available to check the model; start one, or wait for the local workers");
  }
  return api;
}

absl::StatusOr<double> Registrar::Validate(const VariantSpec& spec,
                                           const std::string& valset_blob) {
  MAITRE_ASSIGN_OR_RETURN(std::shared_ptr<WorkerApi> worker, ValidationWorker());
  absl::MutexLockMaybe measuring(options_.measurement_mu);
  absl::Status status;
  double accuracy = 0;
  if (!valset_blob.empty()) {
    auto evaluation = worker->Evaluate(spec, valset_blob, options_.evaluation_batch);
    status = evaluation.status();
    if (evaluation.ok()) accuracy = evaluation->accuracy;
  } else {
    ProfileRequest smoke;
    smoke.batch_sizes = {1};
    smoke.warmup = 1;
    smoke.repetitions = 1;
    status = worker->ProfileVariant(spec, smoke).status();
  }
  if (status.code() == absl::StatusCode::kInvalidArgument ||
      status.code() == absl::StatusCode::kInternal) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", RuntimeName(spec.runtime), " runtime could not run the model: ", status.message()));
  }
  if (!status.ok()) return status;
  return accuracy;
}

absl::Status Registrar::CheckSameModel(const ModelSpec& spec, const Valset* valset,
                                      const VariantSpec& torch, const VariantSpec& onnx) {
  absl::StatusOr<AgreementSample> sample = MakeAgreementSample(spec, valset, options_.agreement);
  if (!sample.ok()) {
    // Only an input of unknown size without a validation set gets here.
    spdlog::warn("registering {}: the ONNX part is not compared with the TorchScript part: {}",
                 torch.key.model, sample.status().message());
    return absl::OkStatus();
  }
  MAITRE_ASSIGN_OR_RETURN(std::shared_ptr<WorkerApi> worker, ValidationWorker());
  absl::MutexLockMaybe measuring(options_.measurement_mu);
  std::vector<Tensor> outputs[2];
  const VariantSpec* parts[2] = {&torch, &onnx};
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::vector<Tensor>> run = worker->RunOnce(*parts[i], sample->inputs);
    if (run.status().code() == absl::StatusCode::kInvalidArgument ||
        run.status().code() == absl::StatusCode::kInternal) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", RuntimeName(parts[i]->runtime), " runtime could not run the model on ",
          sample->rows, " ", sample->rows_are, ": ", run.status().message()));
    }
    if (!run.ok()) return run.status();
    outputs[i] = *std::move(run);
  }
  absl::StatusOr<double> agree =
      CheckPartsAgree(spec, *sample, outputs[0], outputs[1], options_.agreement);
  if (!agree.ok()) {
    spdlog::info("registering {}: refused: {}", torch.key.model, agree.status().message());
    return agree.status();
  }
  // The margin the tolerance leaves, for whoever tunes it (docs/api.md).
  spdlog::info("registering {}: the ONNX part agrees with the TorchScript part on {} {} "
               "(max |Δ| {:.3g})",
               torch.key.model, sample->rows, sample->rows_are, *agree);
  return absl::OkStatus();
}

bool Registrar::Registering(const std::string& app, const std::string& model) const {
  absl::MutexLock lock(&progress_mu_);
  const std::string prefix = absl::StrCat(app, "/", model);
  for (const auto& [key, progress] : progress_) {
    const bool match = model.empty() ? absl::StartsWith(key, prefix) : key == prefix;
    if (match && !progress.done) return true;
  }
  return false;
}

absl::StatusOr<RegistrationProgress> Registrar::Progress(const std::string& app,
                                                         const std::string& model) const {
  absl::MutexLock lock(&progress_mu_);
  auto it = progress_.find(absl::StrCat(app, "/", model));
  if (it == progress_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no registration of ", app, "/", model, " since the server started"));
  }
  return it->second;
}

absl::StatusOr<registry::AppRecord> Registrar::SetAppDefaults(const std::string& app,
                                                              absl::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        "app defaults must be a JSON object such as {\"latency_ms\": 50, \"min_accuracy\": 0.85}");
  }
  registry::AppRecord record;
  record.name = app;
  struct Field {
    const char* name;
    std::optional<double>* value;
    double lo, hi;
  };
  const Field fields[] = {Field{"latency_ms", &record.defaults.latency_ms, 1e-3, 3.6e6},
                          Field{"min_accuracy", &record.defaults.min_accuracy, 0, 1},
                          Field{"max_cost", &record.defaults.max_cost, 0, 1e9},
                          Field{"max_accuracy_drop", &record.max_accuracy_drop, 0, 1},
                          Field{"sl_min", &record.sl_min, 0, 1}};
  for (const Field& f : fields) {
    auto it = j.find(f.name);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number() || it->get<double>() < f.lo || it->get<double>() > f.hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", f.name, "\" must be a number between ", f.lo, " and ", f.hi));
    }
    // A service level of 0 would ask for nothing: SL_min is in (0, 1].
    if (f.value == &record.sl_min && !(it->get<double>() > 0)) {
      return absl::InvalidArgumentError(
          "\"sl_min\" must be in (0, 1]: the share of the app's queries to answer within "
          "latency_ms");
    }
    *f.value = it->get<double>();
  }
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const Field& f : fields) known = known || key == f.name;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown app default \"", key,
                       "\"; use latency_ms, min_accuracy, max_cost, max_accuracy_drop, sl_min"));
    }
  }
  MAITRE_RETURN_IF_ERROR(options_.registry->PutApp(record));
  MAITRE_RETURN_IF_ERROR(options_.catalog->Reload(*options_.registry));
  return record;
}

absl::StatusOr<int> Registrar::ImportProfiles(absl::string_view csv) {
  MAITRE_ASSIGN_OR_RETURN(std::vector<ProfileRecord> records, ParseProfileCsv(csv));
  for (const ProfileRecord& r : records) {
    if (options_.cluster->types().Find(r.worker_type) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the CSV profiles worker type '", r.worker_type,
          "', which this server's worker-type table does not have"));
    }
  }
  MAITRE_ASSIGN_OR_RETURN(int stored, options_.registry->ImportProfiles(records));
  MAITRE_RETURN_IF_ERROR(options_.catalog->Reload(*options_.registry));
  return stored;
}

void Registrar::SetProgress(const Upload& upload, int step, int steps, std::string phase) {
  absl::MutexLock lock(&progress_mu_);
  progress_[absl::StrCat(upload.app, "/", upload.model)] =
      RegistrationProgress{step, steps, std::move(phase), false, absl::OkStatus()};
}

void Registrar::Queued(const Upload& upload) {
  SetProgress(upload, 0, 1, "waiting for earlier registrations");
}

absl::StatusOr<Registration> Registrar::Register(const Upload& upload) {
  Queued(upload);
  absl::StatusOr<Registration> result;
  {
    absl::MutexLock lock(&mu_);
    result = RegisterLocked(upload);
  }
  absl::MutexLock lock(&progress_mu_);
  RegistrationProgress& p = progress_[absl::StrCat(upload.app, "/", upload.model)];
  p.done = true;
  p.step = p.steps;
  p.error = result.status();
  p.phase = result.ok() ? "ready to serve; other variants are being generated and profiled"
                        : std::string(result.status().message());
  return result;
}

absl::StatusOr<Registration> Registrar::RegisterLocked(const Upload& upload) {
  // One step per part run on a worker, and one to compare two parts.
  const int steps = 3 + (upload.onnx_bytes.empty() ? 1 : 3);
  SetProgress(upload, 1, steps, "checking the upload");
  // Names first: a bad name must not cost a validation run on a worker.
  MAITRE_RETURN_IF_ERROR(registry::ValidateName("app name", upload.app));
  MAITRE_RETURN_IF_ERROR(registry::ValidateName("model name", upload.model));
  if (options_.is_pipeline && options_.is_pipeline(upload.model)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "'", upload.model, "' is a pipeline's name; models and pipelines share "
        "/v2/models/{name}, choose another name"));
  }
  if (upload.model_bytes.empty()) {
    return absl::InvalidArgumentError("the upload needs a 'model' part with the model file");
  }
  if (upload.meta_json.empty()) {
    return absl::InvalidArgumentError(
        "the upload needs a 'meta' part: {\"format\", \"inputs\", \"outputs\"}");
  }
  MAITRE_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpecJson(upload.meta_json));
  bool torchscript = spec.format == ModelFormat::kTorchScript;
  if (torchscript && !LooksLikeZip(upload.model_bytes)) {
    return absl::InvalidArgumentError(
        "the model file is not a TorchScript archive (it is not a zip file); save it with "
        "torch.jit.save, or set \"format\": \"onnx\" in meta for an ONNX file");
  }
  if (!torchscript && !LooksLikeOnnx(upload.model_bytes)) {
    return absl::InvalidArgumentError("the model file is not an ONNX model");
  }
  if (!upload.onnx_bytes.empty() && !LooksLikeOnnx(upload.onnx_bytes)) {
    return absl::InvalidArgumentError("the 'onnx' part is not an ONNX model");
  }
  if (spec.inputs.size() != 1 && !upload.valset_bytes.empty()) {
    return absl::InvalidArgumentError("a validation set needs a model with exactly one input");
  }
  std::optional<Valset> valset;
  if (!upload.valset_bytes.empty()) {
    MAITRE_ASSIGN_OR_RETURN(valset, ParseValset(upload.valset_bytes));
    MAITRE_RETURN_IF_ERROR(CheckValsetFits(*valset, spec));
  }

  // Idempotent by content: the same model bytes under the same name and app
  // change nothing.
  std::string source_hash = Sha256Hex(upload.model_bytes);
  if (auto existing = options_.registry->GetModel(upload.model); existing.ok()) {
    if (existing->app != upload.app) {
      return absl::AlreadyExistsError(absl::StrCat(
          "model '", upload.model, "' is already registered by app '", existing->app,
          "'; model names are global, choose another name"));
    }
    if (existing->source_blob == source_hash) {
      return Summarise(*existing, options_.registry->ListVariants(upload.model), true);
    }
  }

  SetProgress(upload, 2, steps, "storing the files");
  registry::ModelRecord model;
  model.app = upload.app;
  model.name = upload.model;
  model.spec = spec;
  MAITRE_ASSIGN_OR_RETURN(model.source_blob, options_.blobs->Put(upload.model_bytes));
  if (!upload.onnx_bytes.empty()) {
    MAITRE_ASSIGN_OR_RETURN(model.onnx_blob, options_.blobs->Put(upload.onnx_bytes));
  }
  if (!upload.valset_bytes.empty()) {
    MAITRE_ASSIGN_OR_RETURN(model.valset_blob, options_.blobs->Put(upload.valset_bytes));
  }

  // The registered file itself is the first variant; an ONNX companion of a
  // TorchScript model is a second one, run by OpenCV.
  std::vector<std::pair<std::string, Runtime>> files = {
      {model.source_blob, torchscript ? Runtime::kTorch : Runtime::kOpenCv}};
  if (!model.onnx_blob.empty()) files.push_back({model.onnx_blob, Runtime::kOpenCv});
  std::vector<registry::VariantRecord> variants;
  std::vector<VariantSpec> checked;
  for (const auto& [blob, runtime] : files) {
    VariantSpec variant;
    variant.key = {model.name, std::string(RuntimeName(runtime))};
    variant.runtime = runtime;
    variant.blob = blob;
    variant.spec = spec;
    variant.spec.format = runtime == Runtime::kOpenCv ? ModelFormat::kOnnx
                                                      : ModelFormat::kTorchScript;
    SetProgress(upload, 3 + static_cast<int>(variants.size()), steps,
                absl::StrCat("running ", variant.key.ToString(), " on a worker",
                             model.valset_blob.empty() ? "" : " to measure its accuracy"));
    spdlog::info("registering {}: checking {} on a worker", model.name, variant.key.ToString());
    MAITRE_ASSIGN_OR_RETURN(double accuracy, Validate(variant, model.valset_blob));
    registry::VariantRecord record;
    record.key = variant.key;
    record.runtime = runtime;
    record.blob = blob;
    if (!model.valset_blob.empty()) {
      record.accuracy = accuracy;
      record.accuracy_source = AccuracySource::kMeasured;
    } else if (spec.declared_accuracy) {
      record.accuracy = *spec.declared_accuracy;
      record.accuracy_source = AccuracySource::kDeclared;
    }
    record.state = registry::VariantState::kReady;
    variants.push_back(std::move(record));
    checked.push_back(std::move(variant));
  }
  if (checked.size() == 2) {
    SetProgress(upload, steps - 1, steps,
                "checking that the ONNX part is the same model as the TorchScript part");
    MAITRE_RETURN_IF_ERROR(CheckSameModel(spec, valset ? &*valset : nullptr, checked[0],
                                          checked[1]));
  }
  MAITRE_RETURN_IF_ERROR(options_.registry->RegisterModel(model, variants));
  MAITRE_RETURN_IF_ERROR(options_.catalog->Reload(*options_.registry));
  spdlog::info("registered {} for app {} with {} variant(s)", model.name, model.app,
               variants.size());
  if (options_.on_registered) options_.on_registered();
  return Summarise(model, variants, false);
}

}  // namespace maitre::controller
