#include "policy/selection_index.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "policy/selection_rules.h"

namespace maitre::policy {
namespace {

// The id `map` holds for `name`, or a new one appended to `entries`.
template <typename Entry>
int32_t IdFor(absl::flat_hash_map<std::string, int32_t>& map, std::vector<Entry>& entries,
              const std::string& name) {
  auto it = map.find(name);
  if (it != map.end()) return it->second;
  int32_t id = static_cast<int32_t>(entries.size());
  entries.emplace_back();
  map.emplace(name, id);
  return id;
}

}  // namespace

absl::StatusOr<SelectionIndex> SelectionIndex::Create(const SelectionCatalogue& catalogue,
                                                      const SelectionIndex* previous) {
  SelectionIndex idx;
  if (previous != nullptr) idx.KeepIdsOf(*previous);
  MAITRE_RETURN_IF_ERROR(idx.AddWorkerTypes(catalogue.worker_types));
  std::vector<std::pair<VariantId, const ServableVariant*>> sources;
  for (const ServableApp& a : catalogue.apps) MAITRE_RETURN_IF_ERROR(idx.AddApp(a, sources));
  idx.BuildOptions(sources);
  idx.BuildColdOrders();
  return idx;
}

void SelectionIndex::KeepIdsOf(const SelectionIndex& previous) {
  // Keep every id, emptied: what the new catalogue still holds is marked
  // present again; the rest stay as tombstones.
  app_ids_ = previous.app_ids_;
  model_ids_ = previous.model_ids_;
  variant_ids_ = previous.variant_ids_;
  type_ids_ = previous.type_ids_;
  apps_.resize(previous.apps_.size());
  for (size_t i = 0; i < apps_.size(); ++i) apps_[i].name = previous.apps_[i].name;
  models_.resize(previous.models_.size());
  for (size_t i = 0; i < models_.size(); ++i) {
    models_[i].name = previous.models_[i].name;
    models_[i].app = previous.models_[i].app;
  }
  variants_.resize(previous.variants_.size());
  for (size_t i = 0; i < variants_.size(); ++i) {
    const Variant& old = previous.variants_[i];
    Variant& v = variants_[i];
    v.key = old.key;
    v.app = old.app;
    v.model = old.model;
  }
  types_.resize(previous.types_.size());
  for (size_t i = 0; i < types_.size(); ++i) types_[i].type = previous.types_[i].type;
}

absl::Status SelectionIndex::AddWorkerTypes(const std::vector<WorkerType>& worker_types) {
  for (const WorkerType& t : worker_types) {
    WorkerTypeId id = IdFor(type_ids_, types_, t.name);
    if (types_[id].present) {
      return absl::InvalidArgumentError(absl::StrCat("worker type '", t.name, "' listed twice"));
    }
    types_[id].type = t;
    types_[id].present = true;
  }
  return absl::OkStatus();
}

absl::Status SelectionIndex::AddApp(
    const ServableApp& a, std::vector<std::pair<VariantId, const ServableVariant*>>& sources) {
  AppId app = IdFor(app_ids_, apps_, a.name);
  if (apps_[app].present) {
    return absl::InvalidArgumentError(absl::StrCat("app '", a.name, "' listed twice"));
  }
  apps_[app].name = a.name;
  apps_[app].present = true;

  for (const ServableVariant& cv : a.variants) {
    if (!(cv.accuracy >= 0 && cv.accuracy <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat("variant ", cv.key.ToString(),
                                                     " has accuracy ", cv.accuracy,
                                                     "; it must lie in [0, 1]"));
    }
    MAITRE_ASSIGN_OR_RETURN(ModelId model, AddModelOf(cv, app));
    MAITRE_ASSIGN_OR_RETURN(VariantId variant, AddVariant(cv, app, model));
    models_[model].variants.push_back(variant);
    sources.emplace_back(variant, &cv);
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelId> SelectionIndex::AddModelOf(const ServableVariant& cv, AppId app) {
  // Reuse the model's id when it stays in this app.
  ModelId model = kNoId;
  auto mit = model_ids_.find(cv.key.model);
  if (mit != model_ids_.end()) {
    Model& m = models_[mit->second];
    if (m.present && m.app != app) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", cv.key.model, "' belongs to two apps: '", apps_[m.app].name,
                       "' and '", apps_[app].name, "'"));
    }
    if (m.app == app) model = mit->second;
  }
  if (model == kNoId) {
    model = static_cast<ModelId>(models_.size());
    models_.emplace_back();
    model_ids_[cv.key.model] = model;
  }
  Model& m = models_[model];
  if (!m.present) {
    m.name = cv.key.model;
    m.app = app;
    m.present = true;
    apps_[app].models.push_back(model);
  }
  return model;
}

absl::StatusOr<VariantId> SelectionIndex::AddVariant(const ServableVariant& cv, AppId app,
                                                     ModelId model) {
  // Likewise, a variant's id survives only within the same app.
  const std::string key = cv.key.ToString();
  VariantId variant = kNoId;
  auto vit = variant_ids_.find(key);
  if (vit != variant_ids_.end()) {
    if (variants_[vit->second].present) {
      return absl::InvalidArgumentError(absl::StrCat("variant ", key, " listed twice"));
    }
    if (variants_[vit->second].app == app) variant = vit->second;
  }
  if (variant == kNoId) {
    variant = static_cast<VariantId>(variants_.size());
    variants_.emplace_back();
    variant_ids_[key] = variant;
  }
  Variant& v = variants_[variant];
  v.key = cv.key;
  v.app = app;
  v.model = model;
  v.present = true;
  v.accuracy = cv.accuracy;
  return variant;
}

void SelectionIndex::BuildOptions(
    const std::vector<std::pair<VariantId, const ServableVariant*>>& sources) {
  // Options, contiguous per variant, in type id order.
  for (const auto& [variant, cv] : sources) {
    Variant& v = variants_[variant];
    v.first_option = static_cast<OptionId>(options_.size());
    for (WorkerTypeId t = 0; t < static_cast<WorkerTypeId>(types_.size()); ++t) {
      const Type& type = types_[t];
      if (!type.present) continue;
      auto pit = cv->profiles.find(type.type.name);
      if (pit == cv->profiles.end() || pit->second.empty()) continue;
      VariantOption o;
      o.variant = variant;
      o.type = t;
      o.accuracy = v.accuracy;
      o.price_per_hour = type.type.price_per_hour;
      o.profile = pit->second;
      o.load_ms = o.profile.load_ms();
      o.memory_mb = o.profile.memory_mb();
      o.latency1_ms = o.profile.LatencyAt(1);
      o.cold_ms = o.load_ms + o.latency1_ms;
      const int max_batch = o.profile.max_batch();
      o.least_latency_from.resize(max_batch);
      o.most_throughput_to.resize(max_batch);
      for (int b = max_batch; b >= 1; --b) {
        const double latency = o.profile.LatencyAt(b);
        o.least_latency_from[b - 1] =
            b == max_batch ? latency : std::min(latency, o.least_latency_from[b]);
      }
      for (int b = 1; b <= max_batch; ++b) {
        const double throughput = o.profile.ThroughputAt(b);
        o.most_throughput_to[b - 1] =
            b == 1 ? throughput : std::max(throughput, o.most_throughput_to[b - 2]);
      }
      options_.push_back(std::move(o));
    }
    v.option_count = static_cast<int32_t>(options_.size()) - v.first_option;
  }

  option_ranges_.resize(variants_.size());
  for (VariantId v = 0; v < static_cast<VariantId>(variants_.size()); ++v) {
    const Variant& var = variants_[v];
    if (var.present) option_ranges_[v] = {var.first_option, var.option_count};
  }
  for (const VariantOption& o : options_) option_types_.push_back(o.type);
}

void SelectionIndex::BuildColdOrders() {
  auto cold_less = [this](OptionId a, OptionId b) {
    return selection_internal::ColdBefore(options_[a], options_[b]);
  };
  auto entries = [this](const std::vector<OptionId>& order) {
    std::vector<ColdEntry> out;
    out.reserve(order.size());
    for (OptionId id : order) out.push_back(EntryOf(id));
    return out;
  };
  // From the cold order, stably: by price (the least an option's instances
  // can cost), then least price per qps; equal ones keep the cold order.
  auto by_capacity = [](std::vector<ColdEntry> cold) {
    std::stable_sort(cold.begin(), cold.end(), [](const ColdEntry& a, const ColdEntry& b) {
      if (a.price_per_hour != b.price_per_hour) return a.price_per_hour < b.price_per_hour;
      return a.least_price_per_qps < b.least_price_per_qps;
    });
    return cold;
  };
  auto by_price_per_qps = [](std::vector<ColdEntry> cold) {
    std::stable_sort(cold.begin(), cold.end(), [](const ColdEntry& a, const ColdEntry& b) {
      return a.least_price_per_qps < b.least_price_per_qps;
    });
    return cold;
  };
  for (Model& m : models_) {
    if (!m.present) continue;
    for (VariantId v : m.variants) {
      const Variant& var = variants_[v];
      for (int32_t k = 0; k < var.option_count; ++k) m.cold_order.push_back(var.first_option + k);
    }
    std::sort(m.cold_order.begin(), m.cold_order.end(), cold_less);
    m.cold = entries(m.cold_order);
    m.capacity = by_capacity(m.cold);
    m.capacity_per_qps = by_price_per_qps(m.cold);
  }
  for (App& a : apps_) {
    if (!a.present) continue;
    for (ModelId m : a.models) {
      const Model& model = models_[m];
      a.cold_order.insert(a.cold_order.end(), model.cold_order.begin(), model.cold_order.end());
    }
    std::sort(a.cold_order.begin(), a.cold_order.end(), cold_less);
    a.cold = entries(a.cold_order);
    a.capacity = by_capacity(a.cold);
    a.capacity_per_qps = by_price_per_qps(a.cold);
  }
}

AppId SelectionIndex::FindApp(absl::string_view name) const {
  auto it = app_ids_.find(name);
  return it != app_ids_.end() && apps_[it->second].present ? it->second : kNoId;
}

ModelId SelectionIndex::FindModel(absl::string_view name) const {
  auto it = model_ids_.find(name);
  return it != model_ids_.end() && models_[it->second].present ? it->second : kNoId;
}

VariantId SelectionIndex::FindVariant(const VariantKey& key) const {
  auto it = variant_ids_.find(key.ToString());
  return it != variant_ids_.end() && variants_[it->second].present ? it->second : kNoId;
}

WorkerTypeId SelectionIndex::FindType(absl::string_view name) const {
  auto it = type_ids_.find(name);
  return it != type_ids_.end() && types_[it->second].present ? it->second : kNoId;
}

ColdEntry SelectionIndex::EntryOf(OptionId id) const {
  const VariantOption& o = options_[id];
  ColdEntry e;
  e.cold_ms = o.cold_ms;
  e.latency1_ms = o.latency1_ms;
  const double most = o.most_throughput_to.empty() ? 0 : o.most_throughput_to.back();
  e.max_capacity_qps = most;
  e.least_price_per_qps =
      most > 0 ? o.price_per_hour / most : std::numeric_limits<double>::infinity();
  e.accuracy = o.accuracy;
  e.price_per_hour = o.price_per_hour;
  e.memory_mb = o.memory_mb;
  e.option = id;
  e.variant = o.variant;
  e.type = o.type;
  return e;
}

std::string SelectionIndex::OptionName(OptionId id) const {
  const VariantOption& o = options_[id];
  return absl::StrCat(variants_[o.variant].key.ToString(), " on ", types_[o.type].type.name);
}

}  // namespace maitre::policy
