#include "controller/dataplane/selection_catalogue.h"

namespace maitre::controller {

absl::StatusOr<policy::SelectionIndex> BuildSelectionIndex(const CatalogSnapshot& catalog,
                                                           const WorkerTypeTable& types,
                                                           const policy::SelectionIndex* previous) {
  policy::SelectionCatalogue input;
  input.worker_types = types.types();
  for (const auto& [app_name, app] : catalog.apps) {
    policy::ServableApp out;
    out.name = app_name;
    for (const std::string& model_name : app.models) {
      const CatalogModel* model = catalog.FindModel(model_name);
      if (model == nullptr) continue;
      for (const CatalogVariant& v : model->variants) {
        // Only what can serve now and can be priced and timed.
        if (!v.ready() || v.profiles.empty()) continue;
        out.variants.push_back({v.spec.key, v.accuracy, v.profiles});
      }
    }
    input.apps.push_back(std::move(out));
  }
  return policy::SelectionIndex::Create(input, previous);
}

std::map<std::string, double> ModelSloMs(const CatalogSnapshot& catalog) {
  std::map<std::string, double> slo;
  for (const auto& [name, model] : catalog.models) {
    const CatalogApp* app = catalog.FindApp(model.app);
    if (app != nullptr && app->defaults.latency_ms) slo[name] = *app->defaults.latency_ms;
  }
  return slo;
}

}  // namespace maitre::controller
