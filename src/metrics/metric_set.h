// The MetricSet owns a process's metric families and renders them in the
// Prometheus text exposition format 0.0.4 for GET /metrics (docs/operations.md,
// "Metrics").
//
// Two kinds of family:
// - live families (AddCounter, AddGauge, AddHistogram), updated on the data
//   path through handles (metrics.h);
// - collected families (AddCollectedGauge, AddCollectedCounter), whose
//   samples are filled at scrape time by collectors (AddCollector): for
//   cluster-wide figures computed from a state snapshot, such as instances
//   by state, worker utilisation or the cost rate.
//
// Registration validates names (naming.h) and returns InvalidArgument or
// AlreadyExists, so a bad name fails the registering module's own tests.
// There is no global metric set: one is made by whoever serves /metrics and
// passed to the modules that report (docs/architecture.md, "Conventions").
//
// Thread-safety: thread-safe. Families and handles stay valid until the
// MetricSet is destroyed; nothing is ever unregistered except collectors.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "metrics/metrics.h"

namespace maitre::metrics {

struct FamilyOptions {
  std::string name;   // e.g. "maitre_requests_total"
  std::string help;   // one line for people; must not be empty
  std::vector<std::string> label_names;
};

struct HistogramOptions {
  std::string name;
  std::string help;
  std::vector<std::string> label_names;
  // Finite, strictly increasing upper bounds; the +Inf bucket is implicit.
  // Empty is allowed (only _sum, _count and the +Inf bucket). The default
  // suits durations in seconds; anything else must say its own bounds.
  std::vector<double> bounds = LatencyBuckets();
};

// A family whose samples exist only during a scrape, set by collectors.
// Its type is gauge or counter; a collected counter exports a cumulative
// value kept elsewhere (a worker's reported request count, say).
class CollectedFamily final : public internal::Family {
 private:
  friend class MetricSet;
  friend class Collector;
  using Family::Family;
  void AppendSamples(const Collector& scrape, std::string* out) const override;
  const MetricSet* owner_ = nullptr;
};

// Handed to each collector during MetricSet::Render. Samples are kept for
// this scrape only. Not thread-safe: one scrape's collectors run one after
// another on the scraping thread.
class Collector {
 public:
  // Sets the sample of `family` at `label_values`, replacing an earlier one.
  // Aborts with a message on a programming error: a family of another
  // metric set, or the wrong number of label values.
  void Set(const CollectedFamily* family, LabelValues label_values, double value);
  // Adds to the sample (starting from 0), for counting while iterating:
  // collector.Add(instances, {state_name}, 1) per instance.
  void Add(const CollectedFamily* family, LabelValues label_values, double delta);

 private:
  friend class MetricSet;
  friend class CollectedFamily;
  using Samples = std::map<std::vector<std::string>, double>;
  explicit Collector(const MetricSet* metric_set) : metric_set_(metric_set) {}
  double& Slot(const CollectedFamily* family, LabelValues label_values);
  const Samples* SamplesFor(const CollectedFamily* family) const;

  const MetricSet* metric_set_;
  std::map<const CollectedFamily*, Samples> samples_;
};

using CollectorId = int64_t;

class MetricSet {
 public:
  // What a /metrics response's Content-Type header should say.
  static constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

  MetricSet() = default;
  ~MetricSet();
  MetricSet(const MetricSet&) = delete;
  MetricSet& operator=(const MetricSet&) = delete;

  // Each returns the new family, owned by the MetricSet; InvalidArgument for
  // a bad name, label name, empty help or bad bounds; AlreadyExists when the
  // name, or one of the series names it exports (a histogram's _bucket,
  // _sum and _count), is taken. A family with no label names gets its one
  // child at once, so it is exported (as 0) before its first update.
  absl::StatusOr<CounterFamily*> AddCounter(FamilyOptions options);
  absl::StatusOr<GaugeFamily*> AddGauge(FamilyOptions options);
  absl::StatusOr<HistogramFamily*> AddHistogram(HistogramOptions options);
  absl::StatusOr<CollectedFamily*> AddCollectedGauge(FamilyOptions options);
  absl::StatusOr<CollectedFamily*> AddCollectedCounter(FamilyOptions options);

  // `collect` runs on the scraping thread during every Render, possibly on
  // several threads at once if scrapes overlap, so it must be thread-safe.
  // It must not call back into this MetricSet (Add*, Render, RemoveCollector):
  // the scrape holds the collector list, and that would deadlock.
  CollectorId AddCollector(std::function<void(Collector&)> collect);
  // After this returns the collector is not running and will not run again,
  // so state it captured may be destroyed. Unknown ids are ignored.
  void RemoveCollector(CollectorId id);

  // The text exposition format: families sorted by name, children sorted by
  // label values, collectors' samples included. Families without samples
  // are left out.
  std::string Render() const;

 private:
  absl::Status CheckFamily(absl::string_view name, absl::string_view help,
                           const std::vector<std::string>& label_names, MetricType type) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes ownership of `family`, claiming its series names.
  void Insert(std::unique_ptr<internal::Family> family, std::vector<std::string> series)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<CollectedFamily*> AddCollected(FamilyOptions options, MetricType type);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<internal::Family>> families_ ABSL_GUARDED_BY(mu_);
  // Every series name some family exports, to refuse collisions.
  std::set<std::string> series_names_ ABSL_GUARDED_BY(mu_);

  // Held shared while collectors run, so RemoveCollector (exclusive) waits
  // for a scrape in progress.
  mutable absl::Mutex collectors_mu_;
  std::map<CollectorId, std::function<void(Collector&)>> collectors_
      ABSL_GUARDED_BY(collectors_mu_);
  CollectorId next_collector_id_ ABSL_GUARDED_BY(collectors_mu_) = 1;
};

}  // namespace maitre::metrics
