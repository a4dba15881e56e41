// Pipelines in the simulator's data path (SimPipeline; docs/pipelines.md,
// "Pipelines in the simulator"): a pipeline query's stages sent as queries
// of their stage apps through the same routing as any other query, their
// answers gathered, and the pipeline shown to the allocator as the
// controller's scaling loop shows it.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/simulator.h"

namespace maitre::sim {

namespace {

// Whether `v` is what the plan provisions for `stage`: its model's variant
// on the stage's type, the planned one when the plan names one.
bool PlannedFor(const SimPipelineStage& stage, const SimVariant& v) {
  return v.key.model == stage.model && v.worker_type == stage.worker_type &&
         (stage.variant.empty() || v.key.variant == stage.variant);
}

}  // namespace

bool IsPipelineApp(const SimulationSetup& setup, int32_t app) {
  for (const SimPipeline& p : setup.pipelines) {
    if (p.app == app) return true;
  }
  return false;
}

absl::Status Simulator::CheckPipelines(const SimulationSetup& setup) {
  if (setup.pipelines.empty()) return absl::OkStatus();
  if (setup.routing != "selection") {
    return absl::InvalidArgumentError("pipelines need routing: selection");
  }
  const int32_t n_apps = static_cast<int32_t>(setup.apps.size());
  const int32_t n_types = static_cast<int32_t>(setup.worker_types.size());
  std::vector<int32_t> pipeline_apps;
  for (const SimPipeline& p : setup.pipelines) {
    auto bad = [&p](auto&&... why) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline ", p.name, ": ", why...));
    };
    if (p.app < 0 || p.app >= n_apps) return bad("unknown app");
    const SimApp& app = setup.apps[p.app];
    if (std::count(pipeline_apps.begin(), pipeline_apps.end(), p.app) > 0) {
      return bad("app ", app.name, " is another pipeline's");
    }
    pipeline_apps.push_back(p.app);
    if (!app.models.empty()) return bad("its app ", app.name, " must name no models");
    for (const SimInstanceSpec& spec : setup.instances) {
      if (spec.app == p.app) return bad("its app ", app.name, " must have no instances");
    }
    for (const SimJob& job : setup.jobs) {
      if (job.app == p.app) return bad("its app ", app.name, " cannot run jobs");
    }
    if (p.stages.empty()) return bad("no stages");
    if (p.plan.has_value() && p.plan->stages.size() != p.stages.size()) {
      return bad("its plan has ", p.plan->stages.size(), " stages, not ", p.stages.size());
    }
    for (size_t s = 0; s < p.stages.size(); ++s) {
      const SimPipelineStage& stage = p.stages[s];
      if (stage.app < 0 || stage.app >= n_apps || stage.app == p.app) {
        return bad("stage ", stage.vertex, " names an unknown app");
      }
      const SimApp& stage_app = setup.apps[stage.app];
      if (std::find(stage_app.models.begin(), stage_app.models.end(), stage.model) ==
          stage_app.models.end()) {
        return bad("stage ", stage.vertex, ": app ", stage_app.name, " does not name model ",
                   stage.model);
      }
      for (const pipeline::StageEdge& e : stage.in) {
        if (e.from < 0 || e.from >= static_cast<int32_t>(s)) {
          return bad("stage ", stage.vertex, " takes rows from a stage not before it");
        }
        if (!(e.probability >= 0 && e.probability <= 1)) {
          return bad("stage ", stage.vertex, ": a branch probability outside [0, 1]");
        }
      }
      if (stage.batch < 0) return bad("stage ", stage.vertex, ": batch < 0");
      // Unplanned (-1) only without a plan: a plan provisions each stage on
      // its type.
      if (stage.worker_type == -1 && !p.plan.has_value()) continue;
      if (stage.worker_type < 0 || stage.worker_type >= n_types) {
        return bad("stage ", stage.vertex, " names an unknown worker type");
      }
      if (std::none_of(setup.variants.begin(), setup.variants.end(),
                       [&](const SimVariant& v) { return PlannedFor(stage, v); })) {
        return bad("stage ", stage.vertex, ": no variant of ", stage.model, " on ",
                   setup.worker_types[stage.worker_type].type.name);
      }
    }
  }
  return absl::OkStatus();
}

void Simulator::SetUpPipelines() {
  const SimulationSetup& s = setup_;
  pipeline_of_app_.assign(s.apps.size(), -1);
  planned_batch_.assign(s.variants.size(), 0);
  for (size_t p = 0; p < s.pipelines.size(); ++p) {
    const SimPipeline& spec = s.pipelines[p];
    pipeline_of_app_[spec.app] = static_cast<int32_t>(p);
    PipelineState state;
    state.next.resize(spec.stages.size());
    state.visited.assign(spec.stages.size(), 0);
    for (size_t st = 0; st < spec.stages.size(); ++st) {
      const SimPipelineStage& stage = spec.stages[st];
      state.in_edges.push_back(stage.in);
      for (const pipeline::StageEdge& e : stage.in) {
        state.next[e.from].push_back(static_cast<int32_t>(st));
      }
      if (stage.batch <= 0 || stage.worker_type < 0) continue;
      // The plan's batch caps every instance of its variant on its type, as
      // the controller's loads carry it.
      for (size_t v = 0; v < s.variants.size(); ++v) {
        if (PlannedFor(stage, s.variants[v])) planned_batch_[v] = stage.batch;
      }
    }
    state.paths = Rng(DeriveSeed(s.seed, 0x919e + p));
    pipelines_.push_back(std::move(state));
  }
}

void Simulator::StartPipelineQuery(int32_t p, Nanos deadline) {
  PipelineState& state = pipelines_[p];
  if (setup_.pipelines[p].plan.has_value()) state.arrivals.push_back(now_);
  int32_t q;
  if (free_pipeline_queries_.empty()) {
    q = static_cast<int32_t>(pipeline_queries_.size());
    pipeline_queries_.emplace_back();
  } else {
    q = free_pipeline_queries_.back();
    free_pipeline_queries_.pop_back();
  }
  PipelineQuery& query = pipeline_queries_[q];
  query.pipeline = p;
  query.arrival = now_;
  query.deadline = deadline;
  query.failed = false;
  pipeline::DrawVisits(state.in_edges, state.paths, query.visits);
  const size_t n = state.in_edges.size();
  query.waiting_on.assign(n, 0);
  query.unanswered = 0;
  for (size_t s = 0; s < n; ++s) {
    if (!query.visits[s]) continue;
    query.waiting_on[s] = static_cast<int32_t>(state.in_edges[s].size());
    ++query.unanswered;
  }
  // Held in flight while its first stages go, so that one failing at once
  // does not free the slot under the others.
  query.in_flight = 1;
  for (size_t s = 0; s < n; ++s) {
    if (pipeline_queries_[q].visits[s] && state.in_edges[s].empty()) {
      SendStage(q, static_cast<int32_t>(s));
    }
  }
  --pipeline_queries_[q].in_flight;
  MaybeRelease(q);
}

void Simulator::SendStage(int32_t q, int32_t stage) {
  if (pipeline_queries_[q].failed) return;
  const PipelineQuery& query = pipeline_queries_[q];
  const SimPipelineStage& spec = setup_.pipelines[query.pipeline].stages[stage];
  const SimApp& app = setup_.apps[spec.app];
  RouteRequest request;
  request.app = spec.app;
  request.rows = setup_.apps[setup_.pipelines[query.pipeline].app].rows_per_query;
  // What remains of the pipeline's deadline is the stage's objective.
  request.arrival = now_;
  request.deadline = query.deadline;
  request.min_accuracy = app.min_accuracy;
  ++pipeline_queries_[q].in_flight;
  const int32_t target = Route(request);
  if (target < 0 || target >= static_cast<int32_t>(instances_.size())) {
    OnStageFailed(q, /*rejected=*/true);
    return;
  }
  Tag tag{spec.app, views_[target].accuracy < request.min_accuracy};
  tag.pipeline_query = q;
  tag.stage = stage;
  Enqueue(target, policy::QueuedQuery{now_, request.deadline, request.rows}, tag);
}

void Simulator::OnStageAnswered(int32_t q, int32_t stage, double accuracy) {
  PipelineQuery& query = pipeline_queries_[q];
  --query.in_flight;
  if (query.failed) {
    MaybeRelease(q);
    return;
  }
  --query.unanswered;
  const int32_t p = query.pipeline;
  if (query.unanswered == 0) {
    PipelineState& state = pipelines_[p];
    const int64_t rows = setup_.apps[setup_.pipelines[p].app].rows_per_query;
    state.answered += rows;
    for (size_t s = 0; s < query.visits.size(); ++s) state.visited[s] += rows * query.visits[s];
    Complete(setup_.pipelines[p].app, query.arrival, query.deadline, accuracy,
             /*below_min_accuracy=*/false, Second(now_));
    MaybeRelease(q);
    return;
  }
  ++query.in_flight;  // held while the next stages go (see StartPipelineQuery)
  for (int32_t next : pipelines_[p].next[stage]) {
    PipelineQuery& held = pipeline_queries_[q];
    if (held.visits[next] && --held.waiting_on[next] == 0) SendStage(q, next);
  }
  --pipeline_queries_[q].in_flight;
  MaybeRelease(q);
}

void Simulator::OnStageFailed(int32_t q, bool rejected) {
  PipelineQuery& query = pipeline_queries_[q];
  --query.in_flight;
  if (!query.failed) {
    query.failed = true;
    const int32_t app = setup_.pipelines[query.pipeline].app;
    Counters& second = Second(now_);
    metrics_.end_time = now_;
    Counters* counters[3] = {&metrics_.total, &metrics_.per_app[app], &second};
    for (Counters* c : counters) ++(rejected ? c->rejected : c->dropped);
  }
  MaybeRelease(q);
}

void Simulator::MaybeRelease(int32_t q) {
  const PipelineQuery& query = pipeline_queries_[q];
  if (query.in_flight > 0 || (!query.failed && query.unanswered > 0)) return;
  free_pipeline_queries_.push_back(q);
}

void Simulator::ObservePipelines(bool take_arrivals, control::Observation& o) {
  for (size_t p = 0; p < setup_.pipelines.size(); ++p) {
    const SimPipeline& spec = setup_.pipelines[p];
    if (!spec.plan.has_value()) continue;
    PipelineState& state = pipelines_[p];
    control::ObservedPipeline op;
    op.name = spec.name;
    op.app = setup_.apps[spec.app].name;
    op.plan_id = 1;  // applied once, at the start
    op.plan = *spec.plan;
    for (const SimPipelineStage& stage : spec.stages) {
      op.stage_models.push_back(stage.model);
      op.stage_types.push_back(setup_.worker_types[stage.worker_type].type.name);
      op.stage_variants.push_back(stage.variant);
    }
    // s_m from answered rows once there are as many as the controller
    // waits for.
    if (state.answered >= control::kMeasuredScaleRows) {
      for (int64_t visited : state.visited) {
        op.measured_scale.push_back(static_cast<double>(visited) / state.answered);
      }
    }
    if (take_arrivals) {
      op.arrivals = std::move(state.arrivals);
      state.arrivals.clear();
    }
    o.pipelines.push_back(std::move(op));
  }
}

}  // namespace maitre::sim
