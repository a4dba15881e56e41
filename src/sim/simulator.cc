#include "sim/simulator.h"
#include "sim/simulator_sink.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "policy/latency_table.h"
#include "sim/selection_router.h"

namespace maitre::sim {
namespace {

// The standard normal's 99th percentile: a lognormal with median m and
// sigma s has its p99 at m·exp(s·z99), so s = ln(p99/p50)/z99.
constexpr double kZ99 = 2.3263478740408408;

using policy::BatchDecision;
using policy::QueuedQuery;

}  // namespace

bool AppMayUse(const SimApp& app, const VariantKey& key) {
  return app.variants.empty() ||
         std::find(app.variants.begin(), app.variants.end(), key.ToString()) != app.variants.end();
}

Simulator::Simulator(SimulationSetup setup, std::unique_ptr<ArrivalSource> arrivals)
    : setup_(std::move(setup)), arrivals_(std::move(arrivals)) {}


absl::StatusOr<std::unique_ptr<Simulator>> Simulator::Create(
    SimulationSetup setup, std::unique_ptr<ArrivalSource> arrivals) {
  if (arrivals == nullptr)
    return absl::InvalidArgumentError("the simulator needs an arrival source");
  if (auto status = CheckSetup(setup); !status.ok()) return status;

  auto sim = std::unique_ptr<Simulator>(new Simulator(std::move(setup), std::move(arrivals)));
  const SimulationSetup& s = sim->setup_;
  sim->interruption_draws_ = Rng(DeriveSeed(s.seed, 0x5b07));
  const int32_t n_apps = static_cast<int32_t>(s.apps.size());
  sim->AssignVariantApps();
  sim->SetUpPipelines();
  if (s.routing == "selection") {
    if (auto status = sim->SetUpControl(); !status.ok()) return status;
  } else {
    auto router = CreateRouter(s.routing);
    if (!router.ok()) return router.status();
    sim->router_ = *std::move(router);
  }

  sim->by_app_.assign(n_apps, {});
  sim->metrics_.per_app.assign(n_apps, Counters());
  sim->metrics_.latency_per_app.assign(n_apps, LatencyHistogram());
  sim->metrics_.per_second.reserve(static_cast<size_t>(s.horizon / kSecond) + 2);
  sim->events_.Reserve(64 + 4 * s.instances.size());

  if (auto status = sim->StartInitialCluster(); !status.ok()) return status;
  if (sim->managed()) {
    sim->events_.Push(s.control.report_interval, kControl, 0);
    for (size_t l = 0; l < s.worker_losses.size(); ++l) {
      sim->events_.Push(s.worker_losses[l].at, kWorkerLost, static_cast<uint32_t>(l));
    }
  }
  sim->events_.Push(s.control.report_interval, kDemand, 0);
  sim->FetchArrival();
  return sim;
}

absl::Status Simulator::CheckSetup(const SimulationSetup& setup) {
  const int32_t n_types = static_cast<int32_t>(setup.worker_types.size());
  const int32_t n_variants = static_cast<int32_t>(setup.variants.size());
  const int32_t n_apps = static_cast<int32_t>(setup.apps.size());
  if (n_apps == 0) return absl::InvalidArgumentError("the experiment has no apps");
  for (const SimVariant& v : setup.variants) {
    if (v.worker_type < 0 || v.worker_type >= n_types) {
      return absl::InvalidArgumentError(
          absl::StrCat("variant ", v.key.ToString(), " names an unknown worker type"));
    }
    if (v.profile.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("variant ", v.key.ToString(), " has no profile"));
    }
    if (!(v.cores_per_replica > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("variant ", v.key.ToString(), " needs cores per replica > 0"));
    }
  }
  for (const SimApp& a : setup.apps) {
    if (a.latency <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("app ", a.name, " needs a latency objective > 0"));
    }
  }
  std::vector<int32_t> used = WorkersNeeded(setup);
  for (const SimInstanceSpec& s : setup.instances) {
    if (s.app < 0 || s.app >= n_apps || s.variant < 0 || s.variant >= n_variants) {
      return absl::InvalidArgumentError("an instance names an unknown app or variant");
    }
  }
  for (int32_t t = 0; t < n_types; ++t) {
    if (used[t] > setup.worker_types[t].count) {
      return absl::InvalidArgumentError(
          absl::StrCat(used[t], " instances need workers of type ", setup.worker_types[t].type.name,
                       " but the cluster has ", setup.worker_types[t].count));
    }
  }
  if (auto status = CheckPipelines(setup); !status.ok()) return status;
  if (setup.routing != "selection" && (setup.control.model_autoscaling != ModelAutoscaling::kOff ||
                                       setup.control.cluster_autoscaling)) {
    return absl::InvalidArgumentError("autoscaling needs routing: selection");
  }
  return absl::OkStatus();
}

std::vector<int32_t> WorkersNeeded(const SimulationSetup& setup) {
  const size_t n_types = setup.worker_types.size();
  std::vector<int32_t> own(n_types, 0);
  std::vector<std::set<int32_t>> named(n_types);
  for (const SimInstanceSpec& s : setup.instances) {
    if (s.variant < 0 || s.variant >= static_cast<int32_t>(setup.variants.size())) continue;
    const int32_t t = setup.variants[s.variant].worker_type;
    if (t < 0 || t >= static_cast<int32_t>(n_types)) continue;
    if (s.worker >= 0) {
      named[t].insert(s.worker);
    } else {
      ++own[t];
    }
  }
  std::vector<int32_t> needed(n_types, 0);
  for (size_t t = 0; t < n_types; ++t) {
    const int32_t highest = named[t].empty() ? 0 : *named[t].rbegin() + 1;
    needed[t] = std::max(highest, own[t] + static_cast<int32_t>(named[t].size()));
  }
  return needed;
}

void Simulator::AssignVariantApps() {
  const SimulationSetup& s = setup_;
  const int32_t n_apps = static_cast<int32_t>(s.apps.size());
  const int32_t n_variants = static_cast<int32_t>(s.variants.size());
  // The app each variant serves: the app whose instances run its model, else
  // the app that names its model.
  std::map<std::string, int32_t> model_app;
  for (const SimInstanceSpec& spec : s.instances) {
    model_app.emplace(s.variants[spec.variant].key.model, spec.app);
  }
  for (int32_t a = 0; a < n_apps; ++a) {
    for (const std::string& m : s.apps[a].models) model_app.emplace(m, a);
  }
  variant_app_.assign(n_variants, -1);
  for (int32_t v = 0; v < n_variants; ++v) {
    auto it = model_app.find(s.variants[v].key.model);
    if (it != model_app.end() && AppMayUse(s.apps[it->second], s.variants[v].key)) {
      variant_app_[v] = it->second;
    }
  }
}

absl::Status Simulator::StartInitialCluster() {
  const SimulationSetup& s = setup_;
  const int32_t n_types = static_cast<int32_t>(s.worker_types.size());
  // The workers paid for from the start, then one instance per worker of its
  // variant's type, in order.
  for (int32_t t = 0; t < n_types; ++t) {
    for (int32_t k = 0; k < s.worker_types[t].count; ++k) StartWorker(t, 0);
  }
  // Instances that name their worker are placed first, so that the others
  // find the workers left empty.
  std::vector<const SimInstanceSpec*> order;
  for (const SimInstanceSpec& spec : s.instances) {
    if (spec.worker >= 0) order.push_back(&spec);
  }
  for (const SimInstanceSpec& spec : s.instances) {
    if (spec.worker < 0) order.push_back(&spec);
  }
  std::vector<size_t> next_worker(n_types, 0);
  for (const SimInstanceSpec* placed : order) {
    const SimInstanceSpec& spec = *placed;
    const int32_t type = s.variants[spec.variant].worker_type;
    int32_t w = -1;
    if (spec.worker >= 0) {
      for (int32_t k = 0, seen = 0; k < static_cast<int32_t>(workers_.size()); ++k) {
        if (workers_[k].type == type && seen++ == spec.worker) {
          w = k;
          break;
        }
      }
    }
    for (size_t k = next_worker[type]; w < 0 && k < workers_.size(); ++k) {
      if (workers_[k].type == type && workers_[k].instances.empty()) {
        w = static_cast<int32_t>(k);
        next_worker[type] = k + 1;
      }
    }
    auto i = AddInstance(spec.app, spec.variant, w);
    if (!i.ok()) return i.status();
    Replica r;
    r.instance = *i;
    r.ready = true;
    instances_[*i].replicas.push_back(static_cast<int32_t>(replicas_.size()));
    replicas_.push_back(std::move(r));
    SimInstance& inst = instances_[*i];
    ++inst.ready;
    ++inst.idle;
    RecordShape(spec.variant, -1, 1);
    if (selection_ != nullptr) {
      auto added = selection_->AddInstance(*i, spec.variant, w, 0);
      if (!added.ok()) return added;
      inst.history.state = policy::InstanceState::kActive;
      selection_->SetState(*i, inst.history.state);
      selection_->UpdateInstanceLoad(*i, 1, 1, 0, 0, instances_[*i].max_batch);
      selection_->UpdateWorker(w, 0, FreeMemoryForSelection(workers_[w]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> Simulator::AddInstance(int32_t app, int32_t variant, int32_t worker) {
  const int32_t i = static_cast<int32_t>(instances_.size());
  const SimVariant& v = setup_.variants[variant];
  policy::BatchingOptions options = setup_.batching;
  if (options.slo == 0) options.slo = setup_.apps[app].latency;
  if (planned_batch_[variant] > 0) options.max_batch = planned_batch_[variant];
  absl::StatusOr<std::unique_ptr<policy::BatchingPolicy>> policy =
      setup_.policy_factory ? setup_.policy_factory(i)
                            : policy::CreateBatchingPolicy(options, v.profile);
  if (policy.ok() && *policy == nullptr) policy = absl::InvalidArgumentError("no policy");
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("instance ", i, " (", v.key.ToString(), "): ", policy.status().message()));
  }
  instances_.emplace_back();
  SimInstance& inst = instances_.back();
  inst.policy = *std::move(policy);
  inst.app = app;
  inst.variant = variant;
  inst.worker = worker;
  inst.noise = Rng(DeriveSeed(setup_.seed, 1000 + i));
  inst.max_batch = std::max(1, std::min(options.max_batch, setup_.batching.max_batch));
  // Service times are tabulated up to the largest batch a policy may send;
  // a single larger query is computed on demand.
  const int32_t rows = std::max(1, options.max_batch);
  inst.median_ns.assign(rows + 1, 0);
  inst.sigma.assign(rows + 1, 0);
  for (int32_t r = 1; r <= rows; ++r) {
    double p50 = v.profile.LatencyAt(r);
    double p99 = v.profile.P99At(r);
    inst.median_ns[r] = p50 * kMillisecond;
    inst.sigma[r] = p99 > p50 ? std::log(p99 / p50) / kZ99 : 0;
  }
  inst.queue.reserve(managed() ? 64 : 1024);
  inst.tags.reserve(managed() ? 64 : 1024);
  InstanceView view;
  view.app = app;
  view.variant = variant;
  view.worker_type = v.worker_type;
  view.accuracy = v.accuracy;
  views_.push_back(view);
  if (!managed()) by_app_[app].push_back(i);
  if (worker >= 0) workers_[worker].instances.push_back(i);
  return i;
}

void Simulator::FetchArrival() {
  has_arrival_ = arrivals_->Next(&arrival_);
  if (has_arrival_) arrival_seq_ = events_.TakeSeq();
}

void Simulator::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
}

absl::Status Simulator::RunUntil(Nanos until) {
  while (status_.ok()) {
    const bool have_event = !events_.empty();
    bool take_arrival;
    if (has_arrival_ && have_event) {
      const Event& e = events_.top();
      take_arrival = arrival_.time != e.time ? arrival_.time < e.time : arrival_seq_ < e.seq;
    } else if (has_arrival_ || have_event) {
      take_arrival = has_arrival_;
    } else {
      break;
    }
    if (take_arrival) {
      if (arrival_.time > until) break;
      now_ = std::max(now_, arrival_.time);
      Arrival a = arrival_;
      FetchArrival();
      OnArrival(a);
    } else {
      if (events_.top().time > until) break;
      Event e = events_.Pop();
      now_ = e.time;
      switch (e.kind) {
        case kBatchDone:
          OnBatchDone(static_cast<int32_t>(e.target));
          break;
        case kWake:
          OnWake(static_cast<int32_t>(e.target), e.time);
          break;
        case kExpiry:
          OnExpiry(static_cast<int32_t>(e.target), e.time);
          break;
        case kLoadDone:
          OnLoadDone(static_cast<int32_t>(e.target));
          break;
        case kWorkerUp:
          OnWorkerUp(static_cast<int32_t>(e.target));
          break;
        case kControl:
          OnControl();
          break;
        case kDemand:
          OnDemand();
          break;
        case kWorkerLost:
          OnWorkerLost(static_cast<int32_t>(e.target));
          break;
        case kBurstDone:
          OnBurstDone(static_cast<int32_t>(e.target));
          break;
        case kInterruptionNotice:
          OnInterruptionNotice(static_cast<int32_t>(e.target));
          break;
        case kInterruptionStop:
          OnInterruptionStop(static_cast<int32_t>(e.target));
          break;
      }
    }
    ++events_processed_;
  }
  return status_;
}

Counters& Simulator::Second(Nanos t) {
  size_t s = static_cast<size_t>(t / kSecond);
  if (s >= metrics_.per_second.size()) metrics_.per_second.resize(s + 1);
  return metrics_.per_second[s];
}

void Simulator::Reject(int32_t app, Counters& second) {
  ++metrics_.total.rejected;
  ++metrics_.per_app[app].rejected;
  ++second.rejected;
}

void Simulator::OnArrival(const Arrival& a) {
  const SimApp& app = setup_.apps[a.app];
  metrics_.end_time = now_;
  ++metrics_.total.arrived;
  ++metrics_.per_app[a.app].arrived;
  Counters& second = Second(now_);
  ++second.arrived;

  RouteRequest request;
  request.app = a.app;
  request.arrival = now_;
  request.deadline = now_ + (a.latency > 0 ? a.latency : app.latency);
  request.rows = app.rows_per_query;
  request.min_accuracy = a.min_accuracy >= 0 ? a.min_accuracy : app.min_accuracy;
  if (pipeline_of_app_[a.app] >= 0) {
    StartPipelineQuery(pipeline_of_app_[a.app], request.deadline);
    return;
  }
  int32_t target = -1;
  Nanos estimate = 0;
  if (router_ != nullptr) {
    if (!by_app_[a.app].empty()) {
      target = router_->Route(request, ClusterSnapshot(views_, by_app_, now_));
    }
  } else {
    bool bounced = false;
    target = RouteWithBouncer(request, &bounced, &estimate);
    if (bounced) return;
  }
  if (target < 0 || target >= static_cast<int32_t>(instances_.size())) {
    Reject(a.app, second);
    return;
  }
  Tag tag{a.app, views_[target].accuracy < request.min_accuracy};
  tag.bouncer_estimate = estimate;
  Enqueue(target, QueuedQuery{now_, request.deadline, request.rows}, tag);
}

void Simulator::Enqueue(int32_t target, const QueuedQuery& q, const Tag& tag) {
  SimInstance& inst = instances_[target];
  if (inst.head == inst.queue.size() || inst.queue.back().deadline <= q.deadline) {
    inst.queue.push_back(q);
    inst.tags.push_back(tag);
  } else {
    // A tighter deadline than some queued query: insert in order, after any
    // equal deadline so that ties stay first come, first served.
    auto it = std::upper_bound(inst.queue.begin() + inst.head, inst.queue.end(), q.deadline,
                               [](Nanos d, const QueuedQuery& x) { return d < x.deadline; });
    size_t pos = it - inst.queue.begin();
    inst.queue.insert(it, q);
    inst.tags.insert(inst.tags.begin() + pos, tag);
  }
  views_[target].queued_rows += q.rows;
  inst.demand_rows += q.rows;
  inst.with_objective += tag.best_effort ? 0 : 1;
  if (managed()) {
    ++inst.interval_arrivals;
    ++in_system_;
    Worker& worker = workers_[inst.worker];
    worker.active_this_interval = true;
    if (worker.stops_at.has_value()) {
      ++worker.queries_under_notice;
      worker.last_query_under_notice = now_;
    }
  }
  if (inst.idle > 0) {
    RunDecisions(target);
  } else {
    ArmExpiry(target);
  }
}

void Simulator::OnDemand() {
  const double seconds = ToSeconds(setup_.control.report_interval);
  for (size_t i = 0; i < instances_.size(); ++i) {
    SimInstance& inst = instances_[i];
    if (!inst.alive) continue;
    inst.policy->ObserveDemand(static_cast<double>(inst.demand_rows) / seconds);
    inst.demand_rows = 0;
    // A lower demand may end a wait now, as the worker's replicas re-decide.
    if (inst.idle > 0 && inst.head < inst.queue.size()) RunDecisions(static_cast<int32_t>(i));
  }
  if (has_arrival_ || now_ < setup_.horizon) {
    events_.Push(now_ + setup_.control.report_interval, kDemand, 0);
  }
}

void Simulator::RunDecisions(int32_t i) {
  SimInstance& inst = instances_[i];
  while (inst.idle > 0 && inst.head < inst.queue.size()) {
    absl::Span<const QueuedQuery> live(inst.queue.data() + inst.head,
                                       inst.queue.size() - inst.head);
    if (live[0].deadline <= now_) {
      // Expired, and its expiry event not yet run: answered now, as the
      // worker's reaper does before its replicas decide.
      int32_t expired = 0;
      while (expired < static_cast<int32_t>(live.size()) && live[expired].deadline <= now_) {
        ++expired;
      }
      DropPrefix(i, expired);
      continue;
    }
    BatchDecision d = policy::DecideForInstance(*inst.policy, live, inst.with_objective,
                                                std::max(1, setup_.batching.max_batch), now_);
    ++metrics_.policy_decisions;
    const int32_t size = static_cast<int32_t>(live.size());
    if (d.action == BatchDecision::Action::kWait) {
      if (d.wake_at <= now_) {
        Fail(absl::InternalError(absl::StrCat("batching policy ", inst.policy->name(),
                                              " asked to wait until a time already past")));
        return;
      }
      if (d.wake_at < kInfiniteFuture && d.wake_at != inst.wake_armed) {
        events_.Push(d.wake_at, kWake, static_cast<uint32_t>(i));
        inst.wake_armed = d.wake_at;
      }
      break;
    }
    if (d.count < 1 || d.count > size) {
      Fail(absl::InternalError(absl::StrCat("batching policy ", inst.policy->name(), " decided on ",
                                            d.count, " of ", size, " queries")));
      return;
    }
    if (d.action == BatchDecision::Action::kDrop) {
      OnPolicyDrop(i, d.count);
      continue;
    }
    if (live[0].deadline <= now_) {
      Fail(absl::InternalError(
          absl::StrCat("batching policy ", inst.policy->name(), " dispatched an expired query")));
      return;
    }
    StartBatch(i, d.count);
  }
  ArmExpiry(i);
}

void Simulator::StartBatch(int32_t i, int32_t count) {
  SimInstance& inst = instances_[i];
  int32_t r = -1;
  for (int32_t id : inst.replicas) {
    const Replica& rep = replicas_[id];
    if (rep.ready && !rep.retiring && !rep.busy) {
      r = id;
      break;
    }
  }
  Replica& rep = replicas_[r];
  rep.batch.clear();
  int32_t rows = 0;
  for (int32_t k = 0; k < count; ++k) {
    const QueuedQuery& q = inst.queue[inst.head + k];
    rep.batch.push_back({q.arrival, q.deadline, inst.tags[inst.head + k]});
    rows += q.rows;
  }
  Pop(inst, count);
  rep.busy = true;
  rep.batch_start = now_;
  rep.batch_rows = rows;
  --inst.idle;
  inst.running_rows += rows;
  inst.wake_armed = kInfiniteFuture;
  views_[i].queued_rows -= rows;
  views_[i].running_rows = inst.running_rows;
  ++metrics_.batches;
  metrics_.batch_rows += rows;
  Nanos service = ServiceTime(inst, rows);
  if (inst.worker >= 0) {
    Worker& w = workers_[inst.worker];
    const double own = setup_.variants[inst.variant].cores_per_replica;
    if (setup_.interference.enabled) {
      const double factor = setup_.interference.Factor(own, w.running_cores,
                                                       setup_.worker_types[w.type].type.cores);
      service = static_cast<Nanos>(std::llround(static_cast<double>(service) * factor));
    }
    w.running_cores += own;
  }
  events_.Push(now_ + service, kBatchDone, static_cast<uint32_t>(r));
}

double InterferenceModel::Factor(double own_cores, double other_cores,
                                 double worker_cores) const {
  // Floating-point leftovers of finished batches are not neighbours.
  if (!enabled || other_cores < 1e-9 || !(worker_cores > 0)) return 1;
  const double u = (own_cores + other_cores) / worker_cores;
  const double ramp = onset < 1 ? std::clamp((u - onset) / (1 - onset), 0.0, 1.0) : 0.0;
  return (1 + (slowdown_at_full - 1) * ramp) * (u > 1 ? u * oversubscribed_penalty : 1.0);
}

Nanos Simulator::ServiceTime(SimInstance& inst, int32_t rows) {
  double median, sigma;
  if (rows < static_cast<int32_t>(inst.median_ns.size())) {
    median = inst.median_ns[rows];
    sigma = inst.sigma[rows];
  } else {
    const Profile& p = setup_.variants[inst.variant].profile;
    double p50 = p.LatencyAt(rows), p99 = p.P99At(rows);
    median = p50 * kMillisecond;
    sigma = p99 > p50 ? std::log(p99 / p50) / kZ99 : 0;
  }
  double t = median;
  if (setup_.service_noise && sigma > 0) t = median * std::exp(sigma * inst.noise.Normal());
  return std::max<Nanos>(1, static_cast<Nanos>(std::llround(t)));
}

bool Simulator::Complete(int32_t app, Nanos arrival, Nanos deadline, double accuracy,
                         bool below_min_accuracy, Counters& second) {
  const bool on_time = now_ <= deadline;
  Counters* counters[3] = {&metrics_.total, &metrics_.per_app[app], &second};
  for (Counters* c : counters) {
    ++c->completed;
    c->on_time += on_time;
    c->late += !on_time;
    c->below_min_accuracy += below_min_accuracy;
    c->accuracy_sum += accuracy;
  }
  metrics_.latency.Record(now_ - arrival);
  metrics_.latency_per_app[app].Record(now_ - arrival);
  return on_time;
}

void Simulator::OnBatchDone(int32_t r) {
  Replica& rep = replicas_[r];
  if (rep.gone) return;  // lost with its worker
  const int32_t i = rep.instance;
  SimInstance& inst = instances_[i];
  const double accuracy = setup_.variants[inst.variant].accuracy;
  Counters& second = Second(now_);
  metrics_.end_time = now_;
  int32_t missed = 0;
  int32_t job_rows = 0;  // of a job chunk in this batch: not an online query
  // Pipeline stages answered: their queries go on once this batch is done.
  std::vector<std::pair<int32_t, int32_t>> stages_answered;
  for (const InFlight& q : rep.batch) {
    if (q.tag.job_rows > 0) {
      job_rows += q.tag.job_rows;
      continue;
    }
    if (q.tag.pipeline_query >= 0) {
      missed += now_ > q.deadline;
      stages_answered.emplace_back(q.tag.pipeline_query, q.tag.stage);
      continue;
    }
    const bool on_time =
        Complete(q.tag.app, q.arrival, q.deadline, accuracy, q.tag.below_min_accuracy, second);
    missed += !on_time;
    if (q.tag.bouncer_estimate > 0) {
      metrics_.bouncer.Add(q.tag.bouncer_estimate, now_ - q.arrival, on_time);
    }
  }
  inst.policy->Observe({rep.batch_rows, rep.batch_start, now_, missed});
  rep.busy = false;
  if (inst.worker >= 0) {
    workers_[inst.worker].running_cores -= setup_.variants[inst.variant].cores_per_replica;
  }
  inst.running_rows -= rep.batch_rows;
  views_[i].running_rows = inst.running_rows;
  if (managed()) {
    const int32_t n = static_cast<int32_t>(rep.batch.size());
    Worker& w = workers_[inst.worker];
    inst.interval_served += n;
    ++inst.interval_batches;
    inst.interval_rows += rep.batch_rows;
    inst.interval_compute.push_back(now_ - rep.batch_start);
    const Nanos busy = static_cast<Nanos>(std::llround(
        static_cast<double>(now_ - std::max(rep.batch_start, last_report_)) *
        setup_.variants[inst.variant].cores_per_replica));
    w.busy_core_ns += busy;
    // The job's share of the batch, by rows.
    if (job_rows > 0 && rep.batch_rows > 0) {
      w.job_busy_core_ns += busy * std::min(job_rows, rep.batch_rows) / rep.batch_rows;
    }
    w.active_this_interval = true;
    in_system_ -= n;
    selection_->AddWaiting(i, -n);
    selection_->Answered(i, now_ - rep.batch_start, rep.batch_rows, n);
  }
  rep.batch.clear();
  if (rep.retiring) {
    DropReplica(r);
  } else {
    ++inst.idle;
  }
  RunDecisions(i);
  if (inst.draining) MaybeFinishDraining(i);
  if (job_rows > 0) OnJobChunkDone(job_rows);
  for (const auto& [query, stage] : stages_answered) OnStageAnswered(query, stage, accuracy);
}

void Simulator::DropPrefix(int32_t i, int32_t count) {
  SimInstance& inst = instances_[i];
  Counters& second = Second(now_);
  metrics_.end_time = now_;
  int32_t rows = 0;
  bool lost_job_chunk = false;
  for (int32_t k = 0; k < count; ++k) {
    const Tag& tag = inst.tags[inst.head + k];
    rows += inst.queue[inst.head + k].rows;
    if (tag.job_rows > 0) {
      lost_job_chunk = true;
      continue;
    }
    if (tag.pipeline_query >= 0) {
      OnStageFailed(tag.pipeline_query, /*rejected=*/false);
      continue;
    }
    ++metrics_.total.dropped;
    ++metrics_.per_app[tag.app].dropped;
    ++second.dropped;
    if (tag.bouncer_estimate > 0) {  // unanswered: counted at its deadline, as the controller does
      const QueuedQuery& q = inst.queue[inst.head + k];
      metrics_.bouncer.Add(tag.bouncer_estimate, q.deadline - q.arrival, false);
    }
  }
  Pop(inst, count);
  views_[i].queued_rows -= rows;
  if (managed()) {
    in_system_ -= count;
    selection_->AddWaiting(i, -count);
  }
  if (lost_job_chunk) OnJobChunkLost();
}

void Simulator::Pop(SimInstance& inst, int32_t count) {
  for (int32_t k = 0; k < count; ++k) {
    inst.with_objective -= inst.tags[inst.head + k].best_effort ? 0 : 1;
  }
  inst.head += count;
  if (inst.head == inst.queue.size()) {
    inst.queue.clear();
    inst.tags.clear();
    inst.head = 0;
  } else if (inst.head >= 4096 && inst.head * 2 >= inst.queue.size()) {
    inst.queue.erase(inst.queue.begin(), inst.queue.begin() + inst.head);
    inst.tags.erase(inst.tags.begin(), inst.tags.begin() + inst.head);
    inst.head = 0;
  }
}

void Simulator::OnPolicyDrop(int32_t i, int32_t count) {
  SimInstance& inst = instances_[i];
  // The prefix is in deadline order; the queries kept move behind the ones
  // dropped, still in that order, so the queue stays sorted.
  std::vector<QueuedQuery> kept_queries;
  std::vector<Tag> kept_tags;
  int32_t dropped = 0;
  for (int32_t k = 0; k < count; ++k) {
    const size_t at = inst.head + k;
    Tag& tag = inst.tags[at];
    if (policy::ServeDroppedBestEffort(tag.best_effort, inst.queue[at].deadline, now_)) {
      tag.best_effort = true;
      --inst.with_objective;
      kept_queries.push_back(inst.queue[at]);
      kept_tags.push_back(tag);
    } else {
      inst.queue[inst.head + dropped] = inst.queue[at];
      inst.tags[inst.head + dropped] = tag;
      ++dropped;
    }
  }
  for (size_t k = 0; k < kept_queries.size(); ++k) {
    inst.queue[inst.head + dropped + k] = kept_queries[k];
    inst.tags[inst.head + dropped + k] = kept_tags[k];
  }
  DropPrefix(i, dropped);
}

void Simulator::ArmExpiry(int32_t i) {
  SimInstance& inst = instances_[i];
  if (inst.head == inst.queue.size()) return;
  Nanos deadline = inst.queue[inst.head].deadline;
  // One pending expiry per instance is enough: when it fires it re-arms for
  // the new head. An earlier head deadline needs an earlier event.
  if (deadline < inst.expiry_armed) {
    events_.Push(deadline, kExpiry, static_cast<uint32_t>(i));
    inst.expiry_armed = deadline;
  }
}

void Simulator::OnExpiry(int32_t i, Nanos at) {
  SimInstance& inst = instances_[i];
  if (at == inst.expiry_armed) inst.expiry_armed = kInfiniteFuture;
  int32_t expired = 0;
  for (size_t k = inst.head; k < inst.queue.size() && inst.queue[k].deadline <= now_; ++k)
    ++expired;
  if (expired > 0) DropPrefix(i, expired);
  if (expired > 0 && inst.idle > 0) {
    RunDecisions(i);
  } else {
    ArmExpiry(i);
  }
  if (inst.draining) MaybeFinishDraining(i);
}

void Simulator::OnWake(int32_t i, Nanos at) {
  SimInstance& inst = instances_[i];
  if (inst.idle == 0 || at != inst.wake_armed) return;  // superseded by a later decision
  inst.wake_armed = kInfiniteFuture;
  RunDecisions(i);
}

}  // namespace maitre::sim
