#include "control/pipeline_allocator.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::control {
namespace {

std::string PipelineId(const ObservedPipeline& p) { return absl::StrCat(p.app, "/", p.name); }

const std::string& PlannedVariant(const ObservedPipeline& p, size_t stage) {
  static const std::string kNone;
  return stage < p.stage_variants.size() ? p.stage_variants[stage] : kNone;
}

std::string StageId(const ObservedPipeline& p, size_t stage) {
  return absl::StrCat(p.app, "/", p.name, "/", p.plan.stages[stage].name);
}

// The stage models of every planned pipeline.
std::set<std::string> StageModels(const Observation& observation) {
  std::set<std::string> models;
  for (const ObservedPipeline& p : observation.pipelines) {
    models.insert(p.stage_models.begin(), p.stage_models.end());
  }
  return models;
}

double CoresPerReplica(const Observation& observation, const ObservedWorker& worker,
                       const VariantKey& key) {
  const ModelOption* model = observation.FindModel(key.model);
  const VariantOption* v = model != nullptr ? model->Find(key.variant, worker.type) : nullptr;
  return v != nullptr ? v->cores_per_replica : 1;
}

double FreeCores(const Observation& observation, const ObservedWorker& worker) {
  const WorkerType* type = observation.FindType(worker.type);
  if (type == nullptr) return 0;
  double held = 0;
  for (const ObservedInstance& inst : worker.instances) {
    held += (inst.ready + inst.loading + inst.winding_down) *
            CoresPerReplica(observation, worker, inst.key);
  }
  return type->cores - held;
}

// The variant a stage loads on its type: the planned one, or without one
// the model's first one profiled there (`maitre plan` reads one variant
// per model and names it in the plan).
const VariantOption* StageVariant(const Observation& observation, const ObservedPipeline& p,
                                  size_t stage) {
  const ModelOption* m = observation.FindModel(p.stage_models[stage]);
  if (m == nullptr) return nullptr;
  const std::string& planned = PlannedVariant(p, stage);
  for (const VariantOption& v : m->variants) {
    if (v.worker_type == p.stage_types[stage] && v.profile != nullptr &&
        v.cores_per_replica > 0 && (planned.empty() || v.variant == planned)) {
      return &v;
    }
  }
  return nullptr;
}

// Whether `inst` serves the stage: an instance of its model, of the
// planned variant if there is one.
bool ServesStage(const ObservedPipeline& p, size_t stage, const ObservedInstance& inst) {
  const std::string& planned = PlannedVariant(p, stage);
  return inst.key.model == p.stage_models[stage] &&
         (planned.empty() || inst.key.variant == planned);
}

// Replicas serving the stage or loading for it on workers of its type.
int Held(const Observation& observation, const ObservedPipeline& p, size_t stage) {
  int held = 0;
  for (const ObservedWorker& w : observation.workers) {
    if (w.starting || w.type != p.stage_types[stage]) continue;
    for (const ObservedInstance& inst : w.instances) {
      if (ServesStage(p, stage, inst) && inst.takes_queries) held += inst.ready + inst.loading;
    }
  }
  return held;
}

}  // namespace

Observation WithoutPipelineStages(const Observation& observation) {
  const std::set<std::string> stages = StageModels(observation);
  Observation rest = observation;
  rest.pipelines.clear();
  if (stages.empty()) return rest;
  rest.models.clear();
  for (const ModelOption& m : observation.models) {
    if (stages.count(m.name) == 0) rest.models.push_back(m);
  }
  rest.workers.clear();
  for (const ObservedWorker& w : observation.workers) {
    ObservedWorker shown = w;
    shown.instances.clear();
    for (const ObservedInstance& inst : w.instances) {
      if (stages.count(inst.key.model) == 0) shown.instances.push_back(inst);
    }
    const bool holds_stages = shown.instances.size() < w.instances.size();
    if (holds_stages && shown.instances.empty()) continue;
    // Busy with the pipeline's replicas: not to be given back as idle.
    if (holds_stages) shown.idle_since.reset();
    rest.workers.push_back(std::move(shown));
  }
  return rest;
}

PipelineAllocator::PipelineAllocator(std::unique_ptr<Allocator> inner,
                                     const AllocatorOptions& options)
    : inner_(std::move(inner)), options_(options) {}

std::vector<int32_t> PipelineAllocator::Replicas(const std::string& app,
                                                 const std::string& name) const {
  auto it = tuned_.find(absl::StrCat(app, "/", name));
  return it == tuned_.end() ? std::vector<int32_t>{} : it->second.tuner.replicas();
}

int32_t PipelineAllocator::Target(const ObservedPipeline& p, size_t stage) const {
  auto it = tuned_.find(PipelineId(p));
  if (it == tuned_.end() || it->second.plan_id != p.plan_id) return p.plan.stages[stage].replicas;
  return it->second.tuner.replicas()[stage];
}

int PipelineAllocator::PendingFor(const std::string& stage) {
  absl::MutexLock lock(&pending_->mu);
  auto it = pending_->by_stage.find(stage);
  return it == pending_->by_stage.end() ? 0 : it->second;
}

absl::Status PipelineAllocator::ModelRound(const Observation& observation, ActionSink& sink) {
  if (observation.pipelines.empty()) {
    tuned_.clear();
    return inner_->ModelRound(observation, sink);
  }
  absl::Status status = inner_->ModelRound(WithoutPipelineStages(observation), sink);
  status.Update(Tune(observation, sink));
  status.Update(Provision(observation, sink));
  return status;
}

absl::Status PipelineAllocator::ClusterRound(const Observation& observation, ActionSink& sink) {
  if (observation.pipelines.empty()) return inner_->ClusterRound(observation, sink);
  absl::Status status = inner_->ClusterRound(WithoutPipelineStages(observation), sink);
  AddWorkers(observation, sink);
  return status;
}

absl::Status PipelineAllocator::Tune(const Observation& observation, ActionSink& sink) {
  absl::Status status;
  std::set<std::string> seen;
  for (const ObservedPipeline& p : observation.pipelines) {
    const std::string id = PipelineId(p);
    seen.insert(id);
    auto it = tuned_.find(id);
    if (it == tuned_.end() || it->second.plan_id != p.plan_id) {
      // The first quiet period runs from when the plan is first seen.
      auto tuner = pipeline::Tuner::Create(p.plan, options_.pipeline_tuner, observation.now);
      if (!tuner.ok()) {
        status.Update(absl::InvalidArgumentError(
            absl::StrCat("pipeline ", id, ": ", tuner.status().message())));
        continue;
      }
      tuned_.erase(id);
      it = tuned_.emplace(id, Tuned{p.plan_id, *std::move(tuner)}).first;
    }
    pipeline::Tuner& tuner = it->second.tuner;
    if (!p.measured_scale.empty()) {
      if (absl::Status s = tuner.SetScales(p.measured_scale); !s.ok()) {
        status.Update(absl::InvalidArgumentError(absl::StrCat("pipeline ", id, ": ", s.message())));
      }
    }
    for (Nanos at : p.arrivals) tuner.Observe(at);
    const pipeline::TunerDecision d = tuner.Decide(observation.now);
    if (d.kind == pipeline::TunerDecision::Kind::kNone) continue;
    Decision decision;
    decision.at = observation.now;
    decision.kind = d.kind == pipeline::TunerDecision::Kind::kUp ? "pipeline-up" : "pipeline-down";
    decision.target = id;
    decision.reason = d.reason;
    for (int32_t r : d.replicas) decision.replicas += r;
    sink.Record(decision);
  }
  // Pipelines deleted, or whose plan was withdrawn, are forgotten.
  for (auto it = tuned_.begin(); it != tuned_.end();) {
    it = seen.count(it->first) > 0 ? std::next(it) : tuned_.erase(it);
  }
  return status;
}

absl::Status PipelineAllocator::Provision(const Observation& observation, ActionSink& sink) {
  absl::Status status;
  std::set<std::string> loading;  // workers given a load this round
  for (const ObservedPipeline& p : observation.pipelines) {
    for (size_t m = 0; m < p.plan.stages.size(); ++m) {
      const std::string stage = StageId(p, m);
      if (PendingFor(stage) > 0) continue;
      const std::string& model = p.stage_models[m];
      const std::string& type = p.stage_types[m];
      const int target = Target(p, m);
      int held = Held(observation, p, m);
      const VariantOption* variant = StageVariant(observation, p, m);
      if (held < target && variant == nullptr) {
        // Said once while it lasts: a variant still being profiled takes
        // minutes, and the round runs every second.
        if (blocked_.insert(stage).second) {
          status.Update(absl::FailedPreconditionError(absl::StrCat(
              "pipeline ", PipelineId(p), ": stage ", p.plan.stages[m].name, "'s model ", model,
              " has no ready variant profiled on ", type, " yet; it is loaded once it has")));
        }
        continue;
      }
      blocked_.erase(stage);
      // Workers of the type by free cores, most first; ties by id, so a
      // round's choice does not depend on the report's order.
      std::vector<std::pair<double, const ObservedWorker*>> free;
      for (const ObservedWorker& w : observation.workers) {
        if (w.starting || w.type != type || loading.count(w.id) > 0) continue;
        free.emplace_back(FreeCores(observation, w), &w);
      }
      std::sort(free.begin(), free.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second->id < b.second->id;
      });
      for (const auto& [cores, w] : free) {
        if (held >= target) break;
        const int fits = static_cast<int>(std::floor(cores / variant->cores_per_replica + 1e-9));
        const int add = std::min(fits, target - held);
        if (add <= 0) continue;
        const VariantKey key{model, variant->variant};
        {
          absl::MutexLock lock(&pending_->mu);
          pending_->by_stage[stage] += add;
        }
        loading.insert(w->id);
        sink.Load(w->id, key, add, {}, [pending = pending_, stage, add] {
          absl::MutexLock lock(&pending->mu);
          if ((pending->by_stage[stage] -= add) <= 0) pending->by_stage.erase(stage);
        });
        held += add;
        sink.Record({observation.now, "pipeline-load", w->id, key.ToString(), add,
                     absl::StrCat("pipeline ", PipelineId(p), " stage ", p.plan.stages[m].name,
                                  " held at ", target)});
      }
      // Too many: the largest instances shrink first, their ready replicas
      // only (a loading one is counted, and shrunk once it serves).
      while (held > target) {
        const ObservedWorker* from = nullptr;
        const ObservedInstance* largest = nullptr;
        for (const ObservedWorker& w : observation.workers) {
          if (w.starting || w.type != type || loading.count(w.id) > 0) continue;
          for (const ObservedInstance& inst : w.instances) {
            if (!ServesStage(p, m, inst) || !inst.takes_queries || inst.ready == 0) continue;
            if (largest == nullptr || inst.ready > largest->ready) {
              from = &w;
              largest = &inst;
            }
          }
        }
        if (largest == nullptr) break;
        const int remove = std::min(largest->ready, held - target);
        sink.Remove(from->id, largest->key, remove);
        loading.insert(from->id);
        held -= remove;
        sink.Record({observation.now, "pipeline-remove", from->id, largest->key.ToString(),
                     remove,
                     absl::StrCat("pipeline ", PipelineId(p), " stage ", p.plan.stages[m].name,
                                  " held at ", target)});
      }
      // Another variant of a stage planned on one serves none of its
      // queries: its cores go back to the stage.
      if (PlannedVariant(p, m).empty()) continue;
      for (const ObservedWorker& w : observation.workers) {
        if (w.starting || loading.count(w.id) > 0) continue;
        for (const ObservedInstance& inst : w.instances) {
          if (inst.key.model != model || ServesStage(p, m, inst) || inst.ready == 0) continue;
          sink.Remove(w.id, inst.key, inst.ready);
          sink.Record({observation.now, "pipeline-remove", w.id, inst.key.ToString(), inst.ready,
                       absl::StrCat("pipeline ", PipelineId(p), " stage ", p.plan.stages[m].name,
                                    " is planned on ", PlannedVariant(p, m))});
        }
      }
    }
  }
  return status;
}

void PipelineAllocator::AddWorkers(const Observation& observation, ActionSink& sink) {
  if (!options_.cluster_scaling) return;
  // Replicas still to place, by type, in cores; and the cores free there.
  std::map<std::string, double> wanted;
  for (const ObservedPipeline& p : observation.pipelines) {
    for (size_t m = 0; m < p.plan.stages.size(); ++m) {
      const std::string& type = p.stage_types[m];
      const VariantOption* variant = StageVariant(observation, p, m);
      if (variant == nullptr) continue;
      const int missing = Target(p, m) - Held(observation, p, m) -
                          PendingFor(StageId(p, m));
      if (missing > 0) wanted[type] += missing * variant->cores_per_replica;
    }
  }
  for (const auto& [type_name, cores] : wanted) {
    const WorkerType* type = observation.FindType(type_name);
    if (type == nullptr || type->cores <= 0) continue;
    double free = 0;
    int count = 0;
    for (const ObservedWorker& w : observation.workers) {
      if (w.type != type_name) continue;
      ++count;
      free += w.starting ? type->cores : std::max(0.0, FreeCores(observation, w));
    }
    auto max = options_.max_workers.find(type_name);
    int add = static_cast<int>(std::ceil((cores - free) / type->cores - 1e-9));
    if (max != options_.max_workers.end()) add = std::min(add, max->second - count);
    for (int i = 0; i < add; ++i) {
      sink.AddWorker(type_name);
      sink.Record({observation.now, "pipeline-add-worker", type_name, "", 1,
                   absl::StrFormat("pipeline stages need %.1f more cores than are free", cores)});
    }
  }
}

}  // namespace maitre::control
