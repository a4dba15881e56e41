// The static half of variant selection (INFaaS Case I): the catalogue of apps,
// models, variants and worker types, flattened into dense ids and pre-sorted
// lists so that a per-query decision (selection.h) reads a few small arrays
// instead of scanning every variant.
//
// The controller builds an index off the critical path whenever its catalogue
// changes (registration, re-profiling, a new worker type) and swaps it in,
// e.g. as a std::shared_ptr<const SelectionIndex>. Ids are stable across
// rebuilds when the previous index is passed to Create: an app, model,
// variant or worker type keeps its id for as long as it exists, and a
// removed one leaves a tombstone (present() == false) rather than shifting
// the others. That is what lets the live view (selection_live.h), which
// refers to variants and worker types by id, survive a rebuild unchanged.
//
// Thread-safety: immutable after Create; safe to share across threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/profile.h"
#include "core/variant.h"
#include "core/worker_type.h"

namespace maitre::policy {

using AppId = int32_t;
using ModelId = int32_t;
using VariantId = int32_t;
using WorkerTypeId = int32_t;
using OptionId = int32_t;
inline constexpr int32_t kNoId = -1;

// Input: one servable variant: a variant as selection sees it (the
// controller's catalog holds much more about it: controller::CatalogVariant).
// Only variants that are ready to load belong in the catalogue given to the
// index.
struct ServableVariant {
  VariantKey key;
  double accuracy = 0;
  // By worker type name. A variant runs only on the types it has a
  // (non-empty) profile for; profiles for types not in the catalogue's
  // worker_types are ignored.
  std::map<std::string, Profile> profiles;
};

// Input: an app and the variants of all its models. A model belongs to one
// app; model names are unique across apps (they name /v2/models/{model}).
struct ServableApp {
  std::string name;
  std::vector<ServableVariant> variants;
};

struct SelectionCatalogue {
  std::vector<WorkerType> worker_types;
  std::vector<ServableApp> apps;
};

// A (variant, worker type) pair that has a profile: the unit selection
// prices, times and places.
struct VariantOption {
  VariantId variant = kNoId;
  WorkerTypeId type = kNoId;
  double accuracy = 0;
  // An instance holds all of its worker's cores, so it costs its worker
  // type's price (max_cost filters on this).
  double price_per_hour = 0;
  double load_ms = 0;
  double memory_mb = 0;
  double latency1_ms = 0;  // profile.LatencyAt(1): a fresh instance runs batch 1
  double cold_ms = 0;      // load_ms + latency1_ms: a query served by a new load
  Profile profile;
  // The profile's saturation throughput within any latency limit, in
  // O(log max_batch) (selection_rules.h CapacityQps, the same figure as
  // Profile::SaturationQps): by batch b = 1..max_batch (index b − 1), the
  // least LatencyAt over batches b and above (non-decreasing in b), and the
  // most ThroughputAt over batches 1..b.
  std::vector<double> least_latency_from;
  std::vector<double> most_throughput_to;
};

// The figures of one option that a scan for a variant to load reads, packed
// so that the scan walks one contiguous array instead of chasing options.
struct ColdEntry {
  double cold_ms = 0;
  double latency1_ms = 0;
  // The most the option sustains at any batch, and price_per_hour over it:
  // no latency limit gives it more capacity or a lower price per qps (step 4
  // under load passes over options that cannot beat its best so far).
  double max_capacity_qps = 0;
  double least_price_per_qps = 0;
  double accuracy = 0;
  double price_per_hour = 0;
  double memory_mb = 0;
  OptionId option = kNoId;
  VariantId variant = kNoId;
  WorkerTypeId type = kNoId;
};

class SelectionIndex {
 public:
  struct App {
    std::string name;
    bool present = false;
    std::vector<ModelId> models;
    // The options of all the app's variants, in "cold order": cold_ms, then
    // price, then variant id, then type id, ascending. A scan for the best
    // variant to load stops at the first option that fits.
    std::vector<OptionId> cold_order;
    std::vector<ColdEntry> cold;  // cold_order's figures, in the same order
    // The same entries by price, then least_price_per_qps, then cold order:
    // step 4's scan under load (an option's instances cost at least its
    // price, so the scan can stop at the first price above its best cost);
    // and by least_price_per_qps, then cold order, for when the load
    // missing is unknown (the cost is then the price per qps).
    std::vector<ColdEntry> capacity;
    std::vector<ColdEntry> capacity_per_qps;
  };
  struct Model {
    std::string name;
    AppId app = kNoId;
    bool present = false;
    std::vector<VariantId> variants;
    std::vector<OptionId> cold_order;  // as App::cold_order, this model only
    std::vector<ColdEntry> cold;
    std::vector<ColdEntry> capacity;  // as App::capacity
    std::vector<ColdEntry> capacity_per_qps;
  };
  struct Variant {
    VariantKey key;
    AppId app = kNoId;
    ModelId model = kNoId;
    bool present = false;
    double accuracy = 0;
    // The variant's options are options()[first_option, first_option + option_count).
    OptionId first_option = 0;
    int32_t option_count = 0;
  };
  struct Type {
    WorkerType type;
    bool present = false;
  };

  SelectionIndex() = default;

  // Builds the index. With `previous`, every app, model, variant and type
  // that exists in both keeps its id; new ones get new ids; ones gone are
  // kept as tombstones. A variant keeps its id only if it stays in the same
  // app (a model moved to another app gets a new id). Fails on duplicate
  // names (worker type, app, model in two apps, variant key) and on
  // accuracies outside [0, 1] or NaN.
  static absl::StatusOr<SelectionIndex> Create(const SelectionCatalogue& catalogue,
                                               const SelectionIndex* previous = nullptr);

  // Lookups by name, for resolving a request once per query (hash lookups).
  AppId FindApp(absl::string_view name) const;
  ModelId FindModel(absl::string_view name) const;
  VariantId FindVariant(const VariantKey& key) const;
  WorkerTypeId FindType(absl::string_view name) const;

  // Entries by id, tombstones included (check present()).
  absl::Span<const App> apps() const { return apps_; }
  absl::Span<const Model> models() const { return models_; }
  absl::Span<const Variant> variants() const { return variants_; }
  absl::Span<const Type> types() const { return types_; }
  absl::Span<const VariantOption> options() const { return options_; }

  const App& app(AppId id) const { return apps_[id]; }
  const Model& model(ModelId id) const { return models_[id]; }
  const Variant& variant(VariantId id) const { return variants_[id]; }
  const Type& type(WorkerTypeId id) const { return types_[id]; }
  const VariantOption& option(OptionId id) const { return options_[id]; }

  // The option of `variant` on `type`, kNoId if it has no profile there or
  // either id is unknown or a tombstone. A few loads from a compact array:
  // this is on the critical path once per instance a decision looks at.
  OptionId FindOption(VariantId variant, WorkerTypeId type) const {
    if (variant < 0 || variant >= static_cast<VariantId>(option_ranges_.size())) return kNoId;
    const OptionRange& r = option_ranges_[variant];
    for (int32_t k = 0; k < r.count; ++k) {
      if (option_types_[r.first + k] == type) return r.first + k;
    }
    return kNoId;
  }

  // The packed figures of one option.
  ColdEntry EntryOf(OptionId id) const;

  // "model:variant on type" for messages.
  std::string OptionName(OptionId id) const;

 private:
  // The steps of Create, in order.
  // Copies `previous`'s ids and names, every entry not present (a tombstone
  // until the new catalogue names it again).
  void KeepIdsOf(const SelectionIndex& previous);
  absl::Status AddWorkerTypes(const std::vector<WorkerType>& worker_types);
  // Adds the app, its models and variants; appends each variant with the
  // catalogue entry it came from to `sources`, for BuildOptions.
  absl::Status AddApp(const ServableApp& app,
                      std::vector<std::pair<VariantId, const ServableVariant*>>& sources);
  absl::StatusOr<ModelId> AddModelOf(const ServableVariant& variant, AppId app);
  absl::StatusOr<VariantId> AddVariant(const ServableVariant& variant, AppId app, ModelId model);
  // Each variant's options (one per worker type it has a profile on) and the
  // compact ranges FindOption reads.
  void BuildOptions(const std::vector<std::pair<VariantId, const ServableVariant*>>& sources);
  // Every present model's and app's options in cold order, and in
  // capacity order.
  void BuildColdOrders();

  std::vector<App> apps_;
  std::vector<Model> models_;
  std::vector<Variant> variants_;
  std::vector<Type> types_;
  std::vector<VariantOption> options_;
  // By variant id: where its options are (count 0 for tombstones).
  struct OptionRange {
    OptionId first = 0;
    int32_t count = 0;
  };
  std::vector<OptionRange> option_ranges_;
  std::vector<WorkerTypeId> option_types_;  // by option id
  absl::flat_hash_map<std::string, AppId> app_ids_;
  absl::flat_hash_map<std::string, ModelId> model_ids_;
  absl::flat_hash_map<std::string, VariantId> variant_ids_;  // by VariantKey::ToString()
  absl::flat_hash_map<std::string, WorkerTypeId> type_ids_;
};

}  // namespace maitre::policy
