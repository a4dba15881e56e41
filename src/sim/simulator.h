// The discrete-event simulator (DESIGN §4): simulated worker instances whose
// executors take their service times from profiles, each with a deadline-
// ordered queue driven by the real batching policies exactly as the worker
// drives them, fed by an arrival stream through a Router.
//
// The mechanism, per instance, as in the real worker (policy/batching.h):
//  - a query is queued in deadline order; a query whose deadline passes while
//    it is queued is dropped (answered DEADLINE_EXCEEDED) at that moment;
//  - whenever the executor is idle and something changed (an arrival, a
//    finished batch, a drop, or the wake-up time the policy asked for), the
//    policy's Decide() is asked, and its answer is carried out; a finished
//    batch is reported to Observe();
//  - a batch of b rows runs for the profile's p50 at b, or, with noise on, a
//    lognormal draw with that median and the profile's p99 as its 99th
//    percentile.
//
// Events are ordered by (time in ns, sequence number); the simulator is an
// object with its own seeded random streams and no globals, so several can
// run in one process and the same inputs always give the same outputs.
//
// Thread-safety: not synchronised; one thread drives a Simulator. Separate
// simulators share nothing and can run on separate threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/profile.h"
#include "core/variant.h"
#include "core/worker_type.h"
#include "policy/batching.h"
#include "sim/event_queue.h"
#include "sim/metrics.h"
#include "sim/rng.h"
#include "sim/router.h"
#include "sim/trace.h"

namespace maitre::sim {

struct SimWorkerType {
  WorkerType type;
  int32_t count = 0;  // workers of this type in the cluster (each is paid for)
};

struct SimVariant {
  VariantKey key;
  int32_t worker_type = 0;  // index into worker_types: the profile's hardware
  double accuracy = 0;
  Profile profile;
};

struct SimApp {
  std::string name;
  Nanos latency = 0;        // the app's latency objective (deadline = arrival + this)
  double min_accuracy = 0;  // the app's default minimum accuracy
};

// One loaded instance: `variant` serving `app`, on a worker of the variant's
// type (one instance per worker for now).
struct SimInstanceSpec {
  int32_t app = 0;
  int32_t variant = 0;
};

struct SimulationSetup {
  std::vector<SimWorkerType> worker_types;
  std::vector<SimVariant> variants;
  std::vector<SimApp> apps;
  std::vector<SimInstanceSpec> instances;
  // The batching policy of every instance. When `batching.slo` is 0 each
  // instance gets its app's latency objective as its SLO.
  policy::BatchingOptions batching;
  // When set, makes instance i's policy instead of CreateBatchingPolicy
  // (tests inject fakes through it).
  std::function<std::unique_ptr<policy::BatchingPolicy>(int32_t instance)> policy_factory;
  std::string routing = "least-queued";
  bool service_noise = false;
  uint64_t seed = 1;
  // The trace's length: reports cover at least this much time.
  Nanos horizon = 0;
};

class Simulator {
 public:
  // Checks the setup (indices, instance counts per worker type, policies) and
  // builds the instances. Takes ownership of the arrival stream.
  static absl::StatusOr<std::unique_ptr<Simulator>> Create(SimulationSetup setup,
                                                           std::unique_ptr<ArrivalSource> arrivals);

  // Runs every event at or before `until`. An error means a policy broke the
  // batching contract (e.g. dispatched an expired query); the run stops.
  absl::Status RunUntil(Nanos until);
  // Runs until no event is left: the trace is over and every query resolved.
  absl::Status Run() { return RunUntil(kInfiniteFuture); }

  bool finished() const { return !has_arrival_ && events_.empty(); }
  Nanos now() const { return now_; }
  const SimMetrics& metrics() const { return metrics_; }
  const SimulationSetup& setup() const { return setup_; }
  int64_t events_processed() const { return events_processed_; }
  // Dollars per simulated second for the whole cluster.
  double cost_per_second() const { return cost_per_second_; }

 private:
  enum EventKind : uint32_t { kBatchDone, kWake, kExpiry };

  struct Tag {
    int32_t app;
    bool below_min_accuracy;
  };
  struct InFlight {
    Nanos arrival;
    Nanos deadline;
    Tag tag;
  };
  struct Instance {
    std::unique_ptr<policy::BatchingPolicy> policy;
    // Live queue = [head, size): ordered by deadline; `tags` runs parallel.
    std::vector<policy::QueuedQuery> queue;
    std::vector<Tag> tags;
    size_t head = 0;
    bool busy = false;
    Nanos batch_start = 0;
    int32_t batch_rows = 0;
    std::vector<InFlight> batch;
    Nanos wake_armed = kInfiniteFuture;
    Nanos expiry_armed = kInfiniteFuture;
    // Service time by rows: median (ns) and lognormal sigma.
    std::vector<double> median_ns;
    std::vector<double> sigma;
    Rng noise{0};
  };

  Simulator(SimulationSetup setup, std::unique_ptr<ArrivalSource> arrivals)
      : setup_(std::move(setup)), arrivals_(std::move(arrivals)) {}

  void FetchArrival();
  void OnArrival(const Arrival& a);
  void OnBatchDone(int32_t i);
  void OnWake(int32_t i, Nanos at);
  void OnExpiry(int32_t i, Nanos at);
  void RunDecisions(int32_t i);
  void StartBatch(int32_t i, int32_t count);
  void DropPrefix(int32_t i, int32_t count);
  void ArmExpiry(int32_t i);
  Nanos ServiceTime(Instance& inst, int32_t rows);
  Counters& Second(Nanos t);
  void Fail(absl::Status status);

  SimulationSetup setup_;
  std::unique_ptr<ArrivalSource> arrivals_;
  std::unique_ptr<Router> router_;
  std::vector<Instance> instances_;
  std::vector<InstanceView> views_;
  std::vector<std::vector<int32_t>> by_app_;
  EventQueue events_;
  Arrival arrival_;  // the next arrival, fetched ahead
  uint64_t arrival_seq_ = 0;
  bool has_arrival_ = false;
  Nanos now_ = 0;
  int64_t events_processed_ = 0;
  double cost_per_second_ = 0;
  SimMetrics metrics_;
  absl::Status status_;
};

}  // namespace maitre::sim
