#include "controller/scaling/scaling_loop.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/logging.h"
#include "core/status_macros.h"

namespace maitre::controller {

// Carries the allocator's decisions out on the real cluster.
class ScalingLoop::Sink : public control::ActionSink {
 public:
  Sink(ScalingLoop* loop, const Options& options) : loop_(loop), options_(options) {}

  void Load(const std::string& worker, const VariantKey& key, int add,
            std::vector<std::pair<VariantKey, int>> then_remove,
            std::function<void()> done) override {
    const CatalogVariant* variant = Find(key);
    if (variant == nullptr) {
      if (done) done();
      return;
    }
    // A loaded variant is reloaded with the new replica count.
    const int target = Held(worker, key).ready + add;
    options_.placer->LoadOn(
        worker, *variant, target,
        [this, worker, key, then_remove = std::move(then_remove), done](absl::Status status) {
          if (status.ok()) {
            {
              absl::MutexLock lock(&loop_->mu_);
              loop_->ready_since_[{worker, key}] = options_.clock->Now();
            }
            for (const auto& [from, n] : then_remove) Remove(worker, from, n);
          }
          if (done) done();
        });
  }

  void Remove(const std::string& worker, const VariantKey& key, int replicas) override {
    const CatalogVariant* variant = Find(key);
    const int left = Held(worker, key).ready - replicas;
    if (left > 0 && variant != nullptr) {
      options_.placer->LoadOn(worker, *variant, left, nullptr);
    } else {
      options_.placer->Unload(worker, key);
    }
  }

  void AddWorker(const std::string& type) override {
    const WorkerType* t = options_.cluster->types().Find(type);
    if (t != nullptr) options_.provider->SetDesired(*t, options_.provider->Desired(type) + 1);
  }

  bool RetireWorker(const std::string& worker) override {
    return options_.provider->Retire(worker);
  }

  void SetRouteWeights(std::vector<control::RouteWeight> weights) override {
    options_.cluster->SetRouteWeights(weights);
  }

  void Record(const control::Decision& decision) override {
    spdlog::info("allocator: {}", control::DecisionLine(decision));
    if (options_.metrics != nullptr) {
      options_.metrics->RecordAutoscalerAction(decision.kind);
      if (!decision.cause.empty()) {
        options_.metrics->RecordVariantChoice(decision.target, decision.cause);
      }
    }
  }

  // The catalog the round's decisions refer to (held for the round).
  void SetCatalog(std::shared_ptr<const CatalogSnapshot> catalog) {
    absl::MutexLock lock(&mu_);
    catalog_ = std::move(catalog);
  }

 private:
  const CatalogVariant* Find(const VariantKey& key) {
    absl::MutexLock lock(&mu_);
    const CatalogModel* model = catalog_ != nullptr ? catalog_->FindModel(key.model) : nullptr;
    return model != nullptr ? model->FindVariant(key.variant) : nullptr;
  }
  HeldReplicas Held(const std::string& worker, const VariantKey& key) const {
    for (const WorkerView& w : options_.cluster->Snapshot()) {
      if (w.id == worker) return HeldOn(w, key);
    }
    return {};
  }

  ScalingLoop* const loop_;
  const Options& options_;
  absl::Mutex mu_;
  // Kept alive while loads it started may still complete.
  std::shared_ptr<const CatalogSnapshot> catalog_ ABSL_GUARDED_BY(mu_);
};

ScalingLoop::ScalingLoop(Options options)
    : options_(std::move(options)), sink_(std::make_unique<Sink>(this, options_)) {}

absl::StatusOr<std::unique_ptr<ScalingLoop>> ScalingLoop::Create(Options options) {
  control::AllocatorOptions allocator = options.allocator_options;
  allocator.types = options.cluster->types().types();
  allocator.model_period = options.model_period;
  allocator.cluster_scaling &= options.provider != nullptr;
  std::unique_ptr<ScalingLoop> loop(new ScalingLoop(options));
  MAITRE_ASSIGN_OR_RETURN(loop->allocator_,
                          control::CreateAllocator(options.allocator, allocator));
  return loop;
}

ScalingLoop::~ScalingLoop() {
  stop_.Request();
  if (thread_.joinable()) thread_.join();
}

void ScalingLoop::Start() {
  thread_ = std::thread([this] {
    const Clock* clock = options_.clock;
    Nanos next_model = clock->Now() + options_.model_period;
    Nanos next_cluster = clock->Now() + options_.cluster_period;
    while (!clock->SleepUntil(std::min(next_model, next_cluster), &stop_)) {
      Nanos now = clock->Now();
      if (now >= next_model) {
        RunModelRound();
        next_model = now + options_.model_period;
      }
      if (now >= next_cluster) {
        RunClusterRound();
        next_cluster = now + options_.cluster_period;
      }
    }
  });
}

control::Observation ScalingLoop::Observe(const CatalogSnapshot& catalog, bool take_refused) {
  control::Observation o;
  o.now = options_.clock->Now();
  o.types = options_.cluster->types().types();
  for (const auto& [name, model] : catalog.models) {
    control::ModelOption m;
    m.name = model.name;
    m.app = model.app;
    m.slo_ms = options_.default_slo_ms;
    if (const CatalogApp* app = catalog.FindApp(model.app)) {
      if (app->defaults.latency_ms) m.slo_ms = *app->defaults.latency_ms;
      m.min_accuracy = app->defaults.min_accuracy;
      m.max_accuracy_drop = app->max_accuracy_drop;
      m.sl_min = app->sl_min;
    }
    for (const CatalogVariant& v : model.variants) {
      if (!v.ready()) continue;
      for (const WorkerType& type : o.types) {
        if (const Profile* p = v.ProfileOn(type.name)) {
          m.variants.push_back({v.spec.key.variant, type.name, v.accuracy, p, 1});
        }
      }
    }
    o.models.push_back(std::move(m));
  }
  absl::MutexLock lock(&mu_);
  std::map<std::pair<std::string, VariantKey>, Nanos> ready_since;
  for (const WorkerView& w : options_.cluster->Snapshot()) {
    // A worker under an interruption notice is leaving: the allocator plans
    // without it (its replacement shows as starting), and nothing it
    // decides can land there (docs/operations.md, "Spot interruptions").
    // What it is still offered is the app's demand all the same.
    if (w.leaving_at.has_value()) {
      for (const InstanceView& inst : w.instances) {
        control::CountLeaving(o, inst.key.model, inst.stats.arrival_qps);
      }
      continue;
    }
    control::ObservedWorker ow;
    ow.id = w.id;
    ow.type = w.type.name;
    ow.cpu_utilisation = w.cpu_utilisation;
    ow.memory_used_mb = w.memory_mb;
    ow.idle_since = w.idle_since;
    for (const InstanceView& inst : w.instances) {
      control::ObservedInstance oi;
      oi.key = inst.key;
      const HeldReplicas held = HeldBy(inst);
      oi.ready = held.ready;
      oi.loading = held.loading;
      oi.takes_queries =
          inst.phase == InstancePhase::kReady || inst.phase == InstancePhase::kLoading;
      if (inst.phase == InstancePhase::kUnloading) oi.winding_down = std::max(1, inst.stats.replicas);
      oi.state = inst.state;
      oi.arrival_qps = inst.stats.arrival_qps;
      oi.served_qps = inst.stats.served_qps;
      oi.queue_length = inst.stats.queue_length;
      oi.mean_batch = inst.stats.mean_batch;
      oi.compute_p50_ms = inst.stats.compute_p50_ms;
      if (inst.phase == InstancePhase::kReady || ready_since_.count({w.id, inst.key}) > 0) {
        // First seen ready: it became ready when its phase began. One that
        // was unloaded and loaded again since the last round is a new
        // instance, as young as its phase (it kept the old one's age, and
        // the allocator shrank or gave up a reload a second old).
        Nanos& since =
            ready_since_.emplace(std::make_pair(w.id, inst.key), inst.phase_since).first->second;
        if (inst.phase == InstancePhase::kReady) since = std::max(since, inst.phase_since);
        oi.ready_since = since;
        ready_since.emplace(std::make_pair(w.id, inst.key), oi.ready_since);
      }
      ow.instances.push_back(std::move(oi));
    }
    o.workers.push_back(std::move(ow));
  }
  ready_since_ = std::move(ready_since);  // instances gone are forgotten
  if (options_.provider != nullptr) {
    for (const auto& [type, n] : options_.provider->Starting()) {
      // The burst pool's workers are not the allocator's.
      if (options_.cluster->types().Find(type) == nullptr) continue;
      for (int i = 0; i < n; ++i) {
        control::ObservedWorker starting;
        starting.id = absl::StrCat("starting-", type, "-", i);
        starting.type = type;
        starting.starting = true;
        o.workers.push_back(std::move(starting));
      }
    }
  }
  if (options_.pipelines != nullptr) ObservePipelines(take_refused, o);
  if (take_refused && options_.refused != nullptr) o.refused_rows = options_.refused->Take();
  if (take_refused && options_.service_level != nullptr) {
    o.service = options_.service_level->Take();
  }
  return o;
}

void ScalingLoop::ObservePipelines(bool take_arrivals, control::Observation& o) {
  for (const auto& p : options_.pipelines->List("")) {
    if (p->plan == nullptr) continue;
    control::ObservedPipeline op;
    op.name = p->name;
    op.app = p->app;
    op.plan_id = p->plan_id;
    op.plan = p->plan->tuner;
    for (const pipeline::AppliedStage& s : p->plan->stages) {
      op.stage_models.push_back(s.model);
      op.stage_types.push_back(s.hardware);
      op.stage_variants.push_back(s.variant);
    }
    if (take_arrivals) op.arrivals = p->arrivals->Take();
    // s_m from served traffic once it is worth more than the plan's: at
    // 1,000 rows a share near 0.3 is known to about ±0.015.
    const StageRows::Counts counts = p->stage_rows->Get();
    if (counts.rows >= control::kMeasuredScaleRows) {
      for (const pipeline::AppliedStage& s : p->plan->stages) {
        auto it = counts.stages.find(s.vertex);
        const int64_t rows = it == counts.stages.end() ? 0 : it->second;
        op.measured_scale.push_back(std::min(1.0, static_cast<double>(rows) / counts.rows));
      }
    }
    o.pipelines.push_back(std::move(op));
  }
}

void ScalingLoop::RunModelRound() {
  std::shared_ptr<const CatalogSnapshot> catalog = options_.catalog->Get();
  sink_->SetCatalog(catalog);
  absl::Status status = allocator_->ModelRound(Observe(*catalog, true), *sink_);
  if (!status.ok()) spdlog::warn("allocator: {}", status.message());
}

void ScalingLoop::RunClusterRound() {
  std::shared_ptr<const CatalogSnapshot> catalog = options_.catalog->Get();
  sink_->SetCatalog(catalog);
  absl::Status status = allocator_->ClusterRound(Observe(*catalog, false), *sink_);
  if (!status.ok()) spdlog::warn("allocator: {}", status.message());
}

}  // namespace maitre::controller
