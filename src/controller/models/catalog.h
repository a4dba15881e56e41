// The data path's view of the registry: apps, models, variants and their
// profiles as an immutable snapshot. Queries read a snapshot without locks
// or database access; registration builds a new snapshot and swaps it in.
//
// Thread-safety: thread-safe; snapshots are immutable and shared.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "controller/registry/registry.h"
#include "core/variant.h"

namespace maitre::controller {

struct CatalogVariant {
  VariantSpec spec;
  double accuracy = 0;
  AccuracySource accuracy_source = AccuracySource::kUnknown;
  registry::VariantState state = registry::VariantState::kPending;
  std::string detail;
  std::map<std::string, Profile> profiles;  // by worker type
  // Profiles the profiler is still refining, by worker type: how many more
  // sweeps it will fold in (absent: final).
  std::map<std::string, int> sweeps_left;

  bool ready() const { return state == registry::VariantState::kReady; }
  const Profile* ProfileOn(const std::string& worker_type) const {
    auto it = profiles.find(worker_type);
    return it == profiles.end() ? nullptr : &it->second;
  }
  int SweepsLeftOn(const std::string& worker_type) const {
    auto it = sweeps_left.find(worker_type);
    return it == sweeps_left.end() ? 0 : it->second;
  }
};

struct CatalogModel {
  std::string app;
  std::string name;
  ModelSpec spec;
  std::string valset_blob;
  std::vector<CatalogVariant> variants;  // the registered variant first

  const CatalogVariant* FindVariant(absl::string_view variant) const;
  // The variant served when a query names only the model and no policy
  // decides otherwise: the registered one if it is ready, else any ready one.
  const CatalogVariant* DefaultVariant() const;
};

struct CatalogApp {
  std::string name;
  Requirements defaults;
  std::optional<double> max_accuracy_drop;  // registry::AppRecord's
  std::vector<std::string> models;
  std::optional<double> sl_min;  // registry::AppRecord's
};

struct CatalogSnapshot {
  std::map<std::string, CatalogApp, std::less<>> apps;
  std::map<std::string, CatalogModel, std::less<>> models;

  const CatalogModel* FindModel(absl::string_view name) const;
  const CatalogApp* FindApp(absl::string_view name) const;
};

class Catalog {
 public:
  Catalog() : snapshot_(std::make_shared<const CatalogSnapshot>()) {}

  std::shared_ptr<const CatalogSnapshot> Get() const {
    absl::ReaderMutexLock lock(&mu_);
    return snapshot_;
  }

  // Rebuilds the snapshot from the registry and tells the listeners.
  absl::Status Reload(const registry::Registry& registry);

  // Called with each new snapshot, on the thread that reloaded. Register
  // listeners before the first reload that matters.
  void OnReload(std::function<void(const std::shared_ptr<const CatalogSnapshot>&)> listener);

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const CatalogSnapshot> snapshot_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const std::shared_ptr<const CatalogSnapshot>&)>> listeners_
      ABSL_GUARDED_BY(mu_);
  // Reloads are serialised so listeners see snapshots in order.
  absl::Mutex reload_mu_;
};

}  // namespace maitre::controller
