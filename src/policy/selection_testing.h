// Catalogues, live states and requests for the selection tests and
// benchmark: small hand-built ones and seeded random ones.
//
// Thread-safety: pure functions of their arguments (the Draw is the caller's).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/profile.h"
#include "policy/selection.h"
#include "policy/selection_index.h"
#include "policy/selection_live.h"

namespace maitre::policy::selection_testing {

// p50(b) = fixed_ms + per_row_ms·b at batches 1, 2, 4, ..., 32; p99 = 1.2·p50.
inline Profile LinearProfile(double fixed_ms, double per_row_ms, double load_ms, double memory_mb) {
  std::vector<LatencyPoint> points;
  for (int b = 1; b <= 32; b *= 2) {
    const double p50 = fixed_ms + per_row_ms * b;
    points.push_back({b, p50, 1.2 * p50});
  }
  return *Profile::Create(std::move(points), load_ms, memory_mb);
}

// Integer draws straight from the engine, so cases are the same on every
// standard library.
class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed) {}
  int64_t Int(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng_() % (hi - lo + 1)); }
  double Real(double lo, double hi) { return lo + (hi - lo) * (rng_() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return Real(0, 1) < p; }
  // A value from a small set, so that ties happen often.
  double Coarse(double lo, double step, int steps) { return lo + step * Int(0, steps); }

 private:
  std::mt19937_64 rng_;
};

struct RandomCatalogueSpec {
  int apps = 3;
  int models_per_app = 3;
  int variants_per_model = 4;
  int worker_types = 2;
  // Coarse values make ties in cost, latency and accuracy common, which is
  // what the tie rules need to be exercised.
  bool coarse = true;
  double profile_missing = 0.15;  // chance a variant lacks a profile on a type
};

inline SelectionCatalogue RandomCatalogue(Draw& d, const RandomCatalogueSpec& spec) {
  SelectionCatalogue c;
  for (int t = 0; t < spec.worker_types; ++t) {
    WorkerType type;
    type.name = absl::StrCat("type-", t);
    type.cores = 1 << t;
    type.memory_mb = 1024 << t;
    type.price_per_hour = spec.coarse ? d.Coarse(0.04, 0.04, 2) : d.Real(0.02, 1.0);
    c.worker_types.push_back(type);
  }
  for (int a = 0; a < spec.apps; ++a) {
    ServableApp app;
    app.name = absl::StrCat("app-", a);
    for (int m = 0; m < spec.models_per_app; ++m) {
      const std::string model = absl::StrCat("app-", a, "-model-", m);
      for (int v = 0; v < spec.variants_per_model; ++v) {
        ServableVariant var;
        var.key = {model, absl::StrCat("v", v)};
        var.accuracy = spec.coarse ? d.Coarse(0.6, 0.05, 7) : d.Real(0.5, 0.99);
        const double fixed = spec.coarse ? d.Coarse(1, 1, 9) : d.Real(0.2, 20);
        const double per_row = spec.coarse ? d.Coarse(0.5, 0.5, 3) : d.Real(0.05, 3);
        const double load = spec.coarse ? d.Coarse(50, 50, 5) : d.Real(20, 800);
        const double memory = spec.coarse ? d.Coarse(100, 100, 4) : d.Real(20, 600);
        for (int t = 0; t < spec.worker_types; ++t) {
          if (d.Chance(spec.profile_missing)) continue;
          // Faster on bigger types, in proportion to cores (roughly).
          const double speed = 1.0 / (1 + t);
          var.profiles[c.worker_types[t].name] =
              LinearProfile(fixed * speed, per_row * speed, load, memory);
        }
        app.variants.push_back(std::move(var));
      }
    }
    c.apps.push_back(std::move(app));
  }
  return c;
}

struct RandomLiveSpec {
  int workers = 8;
  int max_instances_per_worker = 4;
  double not_accepting = 0.05;
  bool coarse = true;  // utilisation and memory from small sets: ties
};

// Workers of random types and load; instances of random variants (any app)
// in random states.
inline void FillRandomLive(Draw& d, const SelectionIndex& index, const RandomLiveSpec& spec,
                           Nanos now, LiveState& live) {
  std::vector<WorkerTypeId> types;
  for (WorkerTypeId t = 0; t < static_cast<WorkerTypeId>(index.types().size()); ++t) {
    if (index.type(t).present) types.push_back(t);
  }
  std::vector<VariantId> variants;
  for (VariantId v = 0; v < static_cast<VariantId>(index.variants().size()); ++v) {
    if (index.variant(v).present) variants.push_back(v);
  }
  if (types.empty()) return;
  for (int i = 0; i < spec.workers; ++i) {
    LiveWorker w;
    w.type = types[d.Int(0, static_cast<int64_t>(types.size()) - 1)];
    w.utilisation = spec.coarse ? d.Coarse(0, 0.25, 4) : d.Real(0, 1);
    w.free_memory_mb = spec.coarse ? d.Coarse(0, 150, 4) : d.Real(0, 1500);
    w.accepting = !d.Chance(spec.not_accepting);
    // Work sent lately, some long enough ago to be forgotten: step 1 weighs
    // it first.
    w.recent_busy_s = spec.coarse ? d.Coarse(0, 0.05, 3) : d.Real(0, 0.5);
    w.recent_at = now - d.Int(0, 12) * kSecond;
    const WorkerId id = live.AddWorker(w);
    if (variants.empty()) continue;
    const int64_t n = d.Int(0, spec.max_instances_per_worker);
    for (int64_t k = 0; k < n; ++k) {
      LiveInstance in;
      in.variant = variants[d.Int(0, static_cast<int64_t>(variants.size()) - 1)];
      in.worker = id;
      const int64_t s = d.Int(0, 9);
      in.state = s < 6   ? InstanceState::kActive
                 : s < 7 ? InstanceState::kOverloaded
                 : s < 8 ? InstanceState::kInterfered
                         : InstanceState::kInactive;
      in.ready_at = now + d.Int(0, 400) * kMillisecond;
      in.waiting = static_cast<int32_t>(d.Int(0, 12));
      in.mean_batch = spec.coarse ? static_cast<double>(d.Int(0, 8)) : d.Real(0, 16);
      in.replicas = static_cast<int32_t>(d.Int(1, 2));
      // Its batching cap by its last report: none said, batch 1, or up to
      // the profiles' largest and beyond.
      const int64_t cap = d.Int(0, 3);
      in.max_batch = cap == 0 ? 0 : cap == 1 ? 1 : static_cast<int32_t>(d.Int(2, 40));
      // What it was offered and served by its last report: step 4 under
      // load prices the load the scope lacks.
      in.arrival_qps = spec.coarse ? d.Coarse(0, 50, 6) : d.Real(0, 400);
      in.served_qps = spec.coarse ? d.Coarse(0, 50, 4) : d.Real(0, 300);
      // How much slower than its profile it answered lately, or unknown:
      // step 1 weighs an Interfered instance at that speed.
      in.slowdown = d.Chance(0.3) ? 0 : spec.coarse ? d.Coarse(0.5, 0.5, 6) : d.Real(0.5, 4);
      // AddInstance refuses a second instance of a variant on one worker;
      // the draw simply moves on.
      (void)live.AddInstance(index, in);
    }
  }
}

// A request within the index's apps, with each requirement present or not
// and values around the catalogue's range, so that all outcomes occur.
inline SelectionRequest RandomRequest(Draw& d, const SelectionIndex& index, Nanos now) {
  SelectionRequest r;
  r.app = static_cast<AppId>(d.Int(0, static_cast<int64_t>(index.apps().size()) - 1));
  const int64_t scope = d.Int(0, 9);
  if (scope == 0 && !index.app(r.app).models.empty()) {
    const auto& models = index.app(r.app).models;
    r.model = models[d.Int(0, static_cast<int64_t>(models.size()) - 1)];
  } else if (scope == 1 && !index.app(r.app).models.empty()) {
    const auto& models = index.app(r.app).models;
    const auto& vs =
        index.model(models[d.Int(0, static_cast<int64_t>(models.size()) - 1)]).variants;
    if (!vs.empty()) r.pinned = vs[d.Int(0, static_cast<int64_t>(vs.size()) - 1)];
  }
  if (d.Chance(0.8)) r.requirements.latency_ms = d.Coarse(1, 2, 20);
  if (d.Chance(0.7)) r.requirements.min_accuracy = d.Coarse(0.55, 0.05, 9);
  if (d.Chance(0.3)) r.requirements.max_cost = d.Coarse(0.0, 0.04, 3);
  r.now = now;
  if (d.Chance(0.8)) {
    r.deadline = now + d.Int(0, 600) * kMillisecond;
  }
  return r;
}

}  // namespace maitre::policy::selection_testing
