#include "controller/frontend/variant_views.h"

#include "absl/strings/str_format.h"
#include "core/profile_csv.h"
#include "core/text_table.h"

namespace maitre::controller {
namespace {

template <typename F>
void ForEachModel(const CatalogSnapshot& catalog, const std::string& app, F f) {
  for (const auto& [name, model] : catalog.models) {
    if (app.empty() || model.app == app) f(model);
  }
}

std::string StateOf(const CatalogVariant& v, const std::string& worker_type) {
  if (!v.ready()) {
    std::string state(registry::VariantStateName(v.state));
    return v.detail.empty() ? state : state + ": " + v.detail;
  }
  if (v.ProfileOn(worker_type) == nullptr) return "ready, no profile here yet";
  const int sweeps = v.SweepsLeftOn(worker_type);
  if (sweeps > 0) {
    return absl::StrFormat("ready, profile refining (up to %d more sweep%s)", sweeps,
                           sweeps == 1 ? "" : "s");
  }
  return "ready";
}

}  // namespace

std::string VariantTable(const CatalogSnapshot& catalog, const std::string& app,
                         const WorkerTypeTable& types) {
  Table table({"MODEL", "VARIANT", "WORKER TYPE", "ACCURACY", "LOAD MS", "P50 B1 MS", "MAX QPS",
               "MEMORY MB", "$/H", "STATE"});
  ForEachModel(catalog, app, [&](const CatalogModel& model) {
    for (const CatalogVariant& v : model.variants) {
      std::string accuracy = absl::StrFormat(
          "%.4f%s", v.accuracy, v.accuracy_source == AccuracySource::kDeclared ? " (declared)" : "");
      for (const WorkerType& type : types.types()) {
        const Profile* p = v.ProfileOn(type.name);
        std::string price = absl::StrFormat("$%.4f", type.price_per_hour);
        if (p == nullptr) {
          table.Add({model.name, v.spec.key.variant, type.name, accuracy, "-", "-", "-", "-",
                     price, StateOf(v, type.name)});
          continue;
        }
        double best_qps = 0;
        for (const LatencyPoint& point : p->points()) {
          best_qps = std::max(best_qps, p->ThroughputAt(point.batch));
        }
        table.Add({model.name, v.spec.key.variant, type.name, accuracy,
                   absl::StrFormat("%.1f", p->load_ms()),
                   absl::StrFormat("%.3f", p->LatencyAt(1)), absl::StrFormat("%.0f", best_qps),
                   absl::StrFormat("%.1f", p->memory_mb()), price, StateOf(v, type.name)});
      }
    }
  });
  return table.Render();
}

std::string VariantProfileCsv(const CatalogSnapshot& catalog, const std::string& app) {
  std::vector<ProfileRecord> records;
  ForEachModel(catalog, app, [&](const CatalogModel& model) {
    for (const CatalogVariant& v : model.variants) {
      for (const auto& [type, profile] : v.profiles) {
        records.push_back(ProfileRecord{v.spec.key, type, v.accuracy, profile});
      }
    }
  });
  return WriteProfileCsv(records);
}

}  // namespace maitre::controller
