#include "controller/models/catalog.h"

namespace maitre::controller {

const CatalogVariant* CatalogModel::FindVariant(absl::string_view variant) const {
  for (const CatalogVariant& v : variants) {
    if (v.spec.key.variant == variant) return &v;
  }
  return nullptr;
}

const CatalogVariant* CatalogModel::DefaultVariant() const {
  for (const CatalogVariant& v : variants) {
    if (v.ready()) return &v;
  }
  return nullptr;
}

const CatalogModel* CatalogSnapshot::FindModel(absl::string_view name) const {
  auto it = models.find(name);
  return it == models.end() ? nullptr : &it->second;
}

const CatalogApp* CatalogSnapshot::FindApp(absl::string_view name) const {
  auto it = apps.find(name);
  return it == apps.end() ? nullptr : &it->second;
}

void Catalog::OnReload(
    std::function<void(const std::shared_ptr<const CatalogSnapshot>&)> listener) {
  absl::MutexLock lock(&mu_);
  listeners_.push_back(std::move(listener));
}

absl::Status Catalog::Reload(const registry::Registry& registry) {
  absl::MutexLock reload_lock(&reload_mu_);
  auto snapshot = std::make_shared<CatalogSnapshot>();
  for (const registry::AppRecord& app : registry.ListApps()) {
    snapshot->apps[app.name] =
        CatalogApp{app.name, app.defaults, app.max_accuracy_drop, {}, app.sl_min};
  }
  std::map<VariantKey, std::map<std::string, Profile>> profiles;
  std::map<VariantKey, std::map<std::string, int>> sweeps_left;
  for (ProfileRecord& p : registry.ListProfiles()) {
    profiles[p.key][p.worker_type] = std::move(p.profile);
    if (p.sweeps_left > 0) sweeps_left[p.key][p.worker_type] = p.sweeps_left;
  }
  for (const registry::ModelRecord& record : registry.ListModels()) {
    CatalogModel model;
    model.app = record.app;
    model.name = record.name;
    model.spec = record.spec;
    model.valset_blob = record.valset_blob;
    std::vector<registry::VariantRecord> variants = registry.ListVariants(record.name);
    // The variant whose file is the registered one comes first, so it is the
    // default until profiles let a policy choose.
    std::stable_partition(variants.begin(), variants.end(),
                          [&](const registry::VariantRecord& v) {
                            return v.blob == record.source_blob;
                          });
    for (registry::VariantRecord& v : variants) {
      CatalogVariant variant;
      variant.spec.key = v.key;
      variant.spec.runtime = v.runtime;
      variant.spec.blob = v.blob;
      variant.spec.optimize_for_inference = v.optimize_for_inference;
      variant.spec.spec = record.spec;
      variant.spec.spec.format =
          v.runtime == Runtime::kOpenCv ? ModelFormat::kOnnx : ModelFormat::kTorchScript;
      variant.accuracy = v.accuracy;
      variant.accuracy_source = v.accuracy_source;
      variant.state = v.state;
      variant.detail = v.detail;
      if (auto it = profiles.find(v.key); it != profiles.end()) variant.profiles = it->second;
      if (auto it = sweeps_left.find(v.key); it != sweeps_left.end()) {
        variant.sweeps_left = it->second;
      }
      model.variants.push_back(std::move(variant));
    }
    if (auto app = snapshot->apps.find(record.app); app != snapshot->apps.end()) {
      app->second.models.push_back(record.name);
    }
    snapshot->models[record.name] = std::move(model);
  }
  std::shared_ptr<const CatalogSnapshot> published = std::move(snapshot);
  std::vector<std::function<void(const std::shared_ptr<const CatalogSnapshot>&)>> listeners;
  {
    absl::MutexLock lock(&mu_);
    snapshot_ = published;
    listeners = listeners_;
  }
  for (auto& listener : listeners) listener(published);
  return absl::OkStatus();
}

}  // namespace maitre::controller
