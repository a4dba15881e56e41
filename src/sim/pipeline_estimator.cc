#include "sim/pipeline_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/rng.h"
#include "sim/event_queue.h"

namespace maitre::sim {

namespace {

using pipeline::PipelineConfig;
using pipeline::PlanningProblem;

enum EventKind : uint32_t { kBatchDone, kWake, kChange };

struct Stage {
  std::unique_ptr<policy::BatchingPolicy> policy;
  const Profile* profile = nullptr;
  int32_t max_rows = 1;
  // Live queue = [head, size), FIFO (every deadline is infinite, so deadline
  // order is arrival order); `ids` runs parallel with the query indices.
  std::vector<policy::QueuedQuery> queue;
  std::vector<int32_t> ids;
  size_t head = 0;
  std::vector<int32_t> idle;  // replica indices, lowest last
  int32_t busy = 0;
  int32_t to_retire = 0;  // busy replicas to remove when their batch ends
  Nanos wake_armed = kInfiniteFuture;
  std::vector<int32_t> next;  // stages with an edge from this one
};

struct Replica {
  int32_t stage = 0;
  Nanos start = 0;
  std::vector<int32_t> batch;
};

class Run {
 public:
  Run(const PlanningProblem& problem, absl::Span<const Nanos> arrivals)
      : problem_(problem), arrivals_(arrivals), n_stages_(problem.stages.size()) {}

  absl::Status Setup(const PipelineConfig& config, const PipelineEstimatorOptions& options);
  absl::Status Simulate();
  PipelineEstimate Result() const;

 private:
  void DrawPaths(uint64_t seed);
  void Enqueue(int32_t stage, int32_t query);
  absl::Status RunDecisions(int32_t stage);
  void OnBatchDone(int32_t replica);
  void OnChange(const ReplicaChange& change);

  const PlanningProblem& problem_;
  absl::Span<const Nanos> arrivals_;
  const size_t n_stages_;
  std::vector<Stage> stages_;
  std::vector<Replica> replicas_;
  std::vector<uint8_t> visits_;       // [query][stage]
  std::vector<int16_t> waiting_on_;   // [query][stage]: sources still to finish it
  std::vector<int32_t> outstanding_;  // [query]: visited stages not yet finished
  std::vector<double> latency_ms_;
  std::vector<int64_t> visitors_;  // per stage
  std::vector<ReplicaChange> changes_;
  double stop_above_ms_ = 0;
  double stage_overhead_ms_ = 0;
  int64_t late_ = 0;        // queries finished after stop_above_ms_
  int64_t late_limit_ = 0;  // more than this many late: the P99 exceeds it
  bool stopped_ = false;
  EventQueue events_;
  Nanos now_ = 0;
};

absl::Status Run::Setup(const PipelineConfig& config, const PipelineEstimatorOptions& options) {
  if (auto s = pipeline::CheckProblem(problem_); !s.ok()) return s;
  if (config.size() != n_stages_) {
    return absl::InvalidArgumentError("the configuration needs one entry per stage");
  }
  stages_.resize(n_stages_);
  for (size_t i = 0; i < n_stages_; ++i) {
    const pipeline::StageConfig& c = config[i];
    const pipeline::PlanningStage& ps = problem_.stages[i];
    if (c.option < 0 || c.option >= static_cast<int32_t>(ps.options.size()) || c.batch < 1 ||
        c.replicas < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage \"", ps.name, "\": needs a known hardware option, batch >= 1, replicas >= 1"));
    }
    Stage& st = stages_[i];
    st.profile = &ps.options[c.option].profile;
    st.max_rows = c.batch;
    policy::BatchingOptions b = options.batching;
    b.max_batch = c.batch;
    auto made = policy::CreateBatchingPolicy(b, *st.profile);
    if (!made.ok()) return made.status();
    st.policy = *std::move(made);
    const int32_t base = static_cast<int32_t>(replicas_.size());
    for (int32_t r = c.replicas - 1; r >= 0; --r) st.idle.push_back(base + r);
    for (int32_t r = 0; r < c.replicas; ++r) replicas_.push_back({static_cast<int32_t>(i), 0, {}});
    for (const pipeline::StageEdge& e : ps.in) stages_[e.from].next.push_back(i);
  }
  for (size_t q = 1; q < arrivals_.size(); ++q) {
    if (arrivals_[q] < arrivals_[q - 1]) {
      return absl::InvalidArgumentError("arrivals must be in non-decreasing time order");
    }
  }
  for (size_t c = 0; c < options.changes.size(); ++c) {
    const ReplicaChange& change = options.changes[c];
    if (change.stage < 0 || change.stage >= static_cast<int32_t>(n_stages_) ||
        change.replicas < 1 || change.at < 0) {
      return absl::InvalidArgumentError(
          "a replica change needs a known stage, replicas >= 1 and a time >= 0");
    }
    events_.Push(change.at, kChange, static_cast<uint32_t>(c));
  }
  changes_ = options.changes;
  stop_above_ms_ = options.stop_above_p99_ms;
  if (!(options.stage_overhead_ms >= 0)) {
    return absl::InvalidArgumentError("the stage overhead must not be negative");
  }
  stage_overhead_ms_ = options.stage_overhead_ms;
  const int64_t n = static_cast<int64_t>(arrivals_.size());
  late_limit_ = n - static_cast<int64_t>(std::ceil(0.99 * static_cast<double>(n)));
  DrawPaths(options.seed);
  return absl::OkStatus();
}

void Run::OnChange(const ReplicaChange& change) {
  Stage& st = stages_[change.stage];
  int32_t live = static_cast<int32_t>(st.idle.size()) + st.busy - st.to_retire;
  // Cancelling a pending retirement keeps a warm replica rather than adding one.
  while (live < change.replicas && st.to_retire > 0) {
    --st.to_retire;
    ++live;
  }
  for (; live < change.replicas; ++live) {
    const int32_t r = static_cast<int32_t>(replicas_.size());
    replicas_.push_back({change.stage, 0, {}});
    st.idle.insert(st.idle.begin(), r);  // the highest index: used last
  }
  for (; live > change.replicas; --live) {
    if (!st.idle.empty()) {
      st.idle.erase(st.idle.begin());  // the highest-numbered idle replica
    } else {
      ++st.to_retire;
    }
  }
}

void Run::DrawPaths(uint64_t seed) {
  const size_t n = arrivals_.size();
  visits_.assign(n * n_stages_, 0);
  waiting_on_.assign(n * n_stages_, 0);
  outstanding_.assign(n, 0);
  latency_ms_.assign(n, 0);
  visitors_.assign(n_stages_, 0);
  std::vector<std::vector<pipeline::StageEdge>> in_edges;
  for (const pipeline::PlanningStage& s : problem_.stages) in_edges.push_back(s.in);
  std::vector<uint8_t> visits;
  // Per stage, the most stages a query visits on one chain ending there.
  std::vector<int32_t> chain(n_stages_);
  for (size_t q = 0; q < n; ++q) {
    // One stream per query: the same query takes the same path whatever the
    // configuration, and the draws of one query do not shift another's.
    Rng rng(DeriveSeed(seed, q));
    pipeline::DrawVisits(in_edges, rng, visits);
    int32_t longest = 0;
    for (size_t s = 0; s < n_stages_; ++s) {
      chain[s] = 0;
      if (!visits[s]) continue;
      for (const pipeline::StageEdge& e : in_edges[s]) chain[s] = std::max(chain[s], chain[e.from]);
      longest = std::max(longest, ++chain[s]);
      visits_[q * n_stages_ + s] = 1;
      waiting_on_[q * n_stages_ + s] = static_cast<int16_t>(in_edges[s].size());
      ++outstanding_[q];
      ++visitors_[s];
    }
    // The serving path's share, once per stage on the query's longest chain
    // (stages on separate branches are served at once); the stages' batch
    // times are added as they finish.
    latency_ms_[q] = stage_overhead_ms_ * longest;
  }
}

void Run::Enqueue(int32_t stage, int32_t query) {
  Stage& st = stages_[stage];
  st.queue.push_back({now_, kInfiniteFuture, 1});
  st.ids.push_back(query);
}

absl::Status Run::RunDecisions(int32_t s) {
  Stage& st = stages_[s];
  while (!st.idle.empty() && st.head < st.queue.size()) {
    auto live = absl::MakeConstSpan(st.queue).subspan(st.head);
    const policy::BatchDecision d =
        policy::DecideForInstance(*st.policy, live, live.size(), st.max_rows, now_);
    if (d.action == policy::BatchDecision::Action::kWait) {
      const Nanos at = std::max(d.wake_at, now_);
      if (at < st.wake_armed && d.wake_at != kInfiniteFuture) {
        st.wake_armed = at;
        events_.Push(at, kWake, s);
      }
      return absl::OkStatus();
    }
    if (d.action == policy::BatchDecision::Action::kDrop || d.count < 1 ||
        d.count > static_cast<int32_t>(live.size())) {
      return absl::InternalError(absl::StrCat(
          "stage \"", problem_.stages[s].name, "\": batching policy \"",
          std::string(st.policy->name()), "\" dropped or miscounted queries that never expire"));
    }
    const int32_t r = st.idle.back();
    st.idle.pop_back();
    ++st.busy;
    Replica& rep = replicas_[r];
    rep.start = now_;
    rep.batch.assign(st.ids.begin() + st.head, st.ids.begin() + st.head + d.count);
    st.head += d.count;
    const double ms = st.profile->LatencyAt(policy::RowsIn(live, d.count));
    events_.Push(now_ + static_cast<Nanos>(std::llround(ms * 1e6)), kBatchDone, r);
  }
  // Reclaim the consumed prefix once it dominates, keeping pushes amortised.
  if (st.head > 1024 && st.head * 2 > st.queue.size()) {
    st.queue.erase(st.queue.begin(), st.queue.begin() + st.head);
    st.ids.erase(st.ids.begin(), st.ids.begin() + st.head);
    st.head = 0;
  }
  return absl::OkStatus();
}

void Run::OnBatchDone(int32_t r) {
  Replica& rep = replicas_[r];
  Stage& st = stages_[rep.stage];
  st.policy->Observe({static_cast<int32_t>(rep.batch.size()), rep.start, now_, 0});
  for (int32_t q : rep.batch) {
    for (int32_t t : st.next) {
      const size_t cell = static_cast<size_t>(q) * n_stages_ + t;
      if (visits_[cell] && --waiting_on_[cell] == 0) Enqueue(t, q);
    }
    if (--outstanding_[q] == 0) {
      latency_ms_[q] += (now_ - arrivals_[q]) / 1e6;
      if (stop_above_ms_ > 0 && latency_ms_[q] > stop_above_ms_ && ++late_ > late_limit_) {
        stopped_ = true;
      }
    }
  }
  rep.batch.clear();
  --st.busy;
  if (st.to_retire > 0) {
    --st.to_retire;
    return;
  }
  // Lowest-numbered idle replica runs next, as in the simulator.
  auto pos = std::upper_bound(st.idle.begin(), st.idle.end(), r, std::greater<int32_t>());
  st.idle.insert(pos, r);
}

absl::Status Run::Simulate() {
  size_t next_arrival = 0;
  std::vector<int32_t> touched;
  while (next_arrival < arrivals_.size() || !events_.empty()) {
    touched.clear();
    // Arrivals go before events at the same instant: a batch finishing then
    // sees the query that arrived with it.
    if (next_arrival < arrivals_.size() &&
        (events_.empty() || arrivals_[next_arrival] <= events_.top().time)) {
      now_ = arrivals_[next_arrival];
      const int32_t q = static_cast<int32_t>(next_arrival++);
      for (size_t s = 0; s < n_stages_; ++s) {
        if (problem_.stages[s].in.empty()) {
          Enqueue(static_cast<int32_t>(s), q);
          touched.push_back(static_cast<int32_t>(s));
        }
      }
    } else {
      const Event e = events_.Pop();
      now_ = e.time;
      if (e.kind == kChange) {
        OnChange(changes_[e.target]);
        touched.push_back(changes_[e.target].stage);
      } else if (e.kind == kWake) {
        Stage& st = stages_[e.target];
        if (st.wake_armed != e.time) continue;  // superseded
        st.wake_armed = kInfiniteFuture;
        touched.push_back(static_cast<int32_t>(e.target));
      } else {
        const int32_t s = replicas_[e.target].stage;
        OnBatchDone(static_cast<int32_t>(e.target));
        touched.push_back(s);
        touched.insert(touched.end(), stages_[s].next.begin(), stages_[s].next.end());
      }
    }
    if (stopped_) return absl::OkStatus();
    for (int32_t s : touched) {
      if (auto status = RunDecisions(s); !status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

PipelineEstimate Run::Result() const {
  PipelineEstimate out;
  out.latency_ms = latency_ms_;
  if (stopped_) {
    out.stopped_above = true;
    out.p99_ms = std::numeric_limits<double>::infinity();
    out.mean_ms = std::numeric_limits<double>::infinity();
    return out;
  }
  const double n = static_cast<double>(arrivals_.size());
  for (int64_t v : visitors_) out.scale_factor.push_back(n > 0 ? v / n : 0);
  if (!latency_ms_.empty()) {
    out.mean_ms = std::accumulate(latency_ms_.begin(), latency_ms_.end(), 0.0) / n;
    out.p99_ms = out.Percentile(0.99);
  }
  return out;
}

}  // namespace

double PipelineEstimate::Percentile(double p) const {
  if (latency_ms.empty()) return 0;
  std::vector<double> sorted = latency_ms;
  const size_t rank = static_cast<size_t>(
      std::clamp<double>(std::ceil(p * sorted.size()), 1, static_cast<double>(sorted.size())));
  std::nth_element(sorted.begin(), sorted.begin() + (rank - 1), sorted.end());
  return sorted[rank - 1];
}

absl::StatusOr<PipelineEstimate> EstimatePipeline(const pipeline::PlanningProblem& problem,
                                                  const pipeline::PipelineConfig& config,
                                                  absl::Span<const Nanos> arrivals,
                                                  const PipelineEstimatorOptions& options) {
  Run run(problem, arrivals);
  if (auto s = run.Setup(config, options); !s.ok()) return s;
  if (auto s = run.Simulate(); !s.ok()) return s;
  return run.Result();
}

pipeline::LatencyOracle EstimatorOracle(const pipeline::PlanningProblem& problem,
                                        absl::Span<const Nanos> arrivals,
                                        double stop_above_p99_ms,
                                        double stage_overhead_ms) {
  PipelineEstimatorOptions options;
  options.stop_above_p99_ms = stop_above_p99_ms;
  options.stage_overhead_ms = stage_overhead_ms;
  return [&problem, arrivals, options](
             const pipeline::PipelineConfig& config) -> absl::StatusOr<double> {
    absl::StatusOr<PipelineEstimate> e = EstimatePipeline(problem, config, arrivals, options);
    if (!e.ok()) return e.status();
    return e->p99_ms;
  };
}

}  // namespace maitre::sim
