// Prometheus metric families and the handles the data path updates.
//
// A family (CounterFamily, GaugeFamily, HistogramFamily) is registered once
// in a MetricSet (metric_set.h) under a name, a help text and label names. Its
// With({values...}) returns a child handle (Counter, Gauge, Histogram) for
// one set of label values. A handle is a pointer-sized value: copy it, keep
// it in the object that updates it, and update it from any thread.
//
// Thread-safety: handles are thread-safe and lock-free; an update is one or
// two relaxed atomic read-modify-writes (plus a bucket search for a
// histogram), never a lock or an allocation. Families are thread-safe;
// With() takes the family's mutex, so call it once per label set and keep
// the handle rather than calling it per request. Children live as long as
// the MetricSet, so a handle must not outlive it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/time.h"
#include "metrics/naming.h"

namespace maitre::metrics {

class Collector;
class MetricSet;

// Label values for With(), in the order of the family's label names.
using LabelValues = absl::Span<const absl::string_view>;

namespace internal {

static_assert(std::atomic<double>::is_always_lock_free, "data-path updates must be lock-free");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "data-path updates must be lock-free");

// C++17 has no fetch_add for atomic<double>; a relaxed compare-exchange loop
// is what it would compile to anyway.
inline void AtomicAdd(std::atomic<double>& target, double delta) {
  double old = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(old, old + delta, std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
  }
}

// Each cell has its own cache line so that threads updating neighbouring
// children (two variants of one model, say) do not slow each other down.
struct alignas(64) CounterCell {
  // Whole increments stay exact in an integer; fractional amounts (seconds
  // of compute) go to a double. The exported value is their sum.
  std::atomic<uint64_t> whole{0};
  std::atomic<double> fraction{0.0};
};

struct alignas(64) GaugeCell {
  std::atomic<double> value{0.0};
};

struct alignas(64) HistogramCell {
  HistogramCell(const double* bounds, size_t num_bounds);
  const double* bounds;  // owned by the family; sorted, finite
  size_t num_bounds;
  // Per-bucket (not cumulative) counts; counts[num_bounds] is the +Inf
  // bucket. _count is their sum, so it always equals the +Inf bucket.
  std::unique_ptr<std::atomic<uint64_t>[]> counts;
  std::atomic<double> sum{0.0};
};

// Aborts with `message`: used for programming errors on paths that return
// a handle, such as the wrong number of label values.
[[noreturn]] void Die(const std::string& message);

}  // namespace internal

// A monotonic counter. A default-constructed Counter is detached: updates
// are accepted and dropped, so optional instrumentation needs no null checks.
class Counter {
 public:
  Counter() = default;

  void Increment() { Increment(1u); }
  // Exact integer increments. Negative amounts are ignored: a counter never
  // goes down (a scrape would read that as a restart).
  template <typename Int>
  void Increment(Int n) {
    static_assert(std::is_integral_v<Int>, "use Add(double) for fractional amounts");
    if constexpr (std::is_signed_v<Int>) {
      if (n < 0) return;
    }
    if (cell_ != nullptr) cell_->whole.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  }
  // Fractional increments, e.g. seconds of compute. Negative and NaN
  // amounts are ignored, for the same reason.
  void Add(double amount) {
    if (!(amount >= 0) || cell_ == nullptr) return;
    internal::AtomicAdd(cell_->fraction, amount);
  }
  double Value() const;
  bool attached() const { return cell_ != nullptr; }

 private:
  friend class CounterFamily;
  explicit Counter(internal::CounterCell* cell) : cell_(cell) {}
  internal::CounterCell* cell_ = nullptr;
};

// A value that goes up and down. Default-constructed: detached, as Counter.
class Gauge {
 public:
  Gauge() = default;

  void Set(double value) {
    if (cell_ != nullptr) cell_->value.store(value, std::memory_order_relaxed);
  }
  void Add(double delta) {
    if (cell_ != nullptr) internal::AtomicAdd(cell_->value, delta);
  }
  void Increment() { Add(1); }
  void Decrement() { Add(-1); }
  double Value() const { return cell_ == nullptr ? 0 : cell_->value.load(std::memory_order_relaxed); }
  bool attached() const { return cell_ != nullptr; }

 private:
  friend class GaugeFamily;
  explicit Gauge(internal::GaugeCell* cell) : cell_(cell) {}
  internal::GaugeCell* cell_ = nullptr;
};

// What a histogram child holds at one moment.
struct HistogramSnapshot {
  std::vector<double> bounds;                // finite upper bounds, ascending
  std::vector<uint64_t> cumulative_counts;   // bounds.size() + 1; last is +Inf
  uint64_t count = 0;                        // == cumulative_counts.back()
  double sum = 0;
};

// Observations counted into buckets with fixed upper bounds. Bucket `le=b`
// counts observations <= b. Default-constructed: detached, as Counter.
class Histogram {
 public:
  Histogram() = default;

  // NaN lands in the +Inf bucket and turns _sum into NaN, as in the Go
  // client: a NaN latency is a bug worth seeing, not hiding.
  void Observe(double value) {
    if (cell_ == nullptr) return;
    const double* begin = cell_->bounds;
    const double* end = begin + cell_->num_bounds;
    size_t bucket = std::isnan(value)
                        ? cell_->num_bounds
                        : static_cast<size_t>(std::lower_bound(begin, end, value) - begin);
    cell_->counts[bucket].fetch_add(1, std::memory_order_relaxed);
    internal::AtomicAdd(cell_->sum, value);
  }
  // Durations are exported in seconds, Prometheus' base unit.
  void ObserveNanos(Nanos duration) { Observe(ToSeconds(duration)); }

  // A scrape that races with Observe may see _sum without the newest
  // observation's bucket, or the reverse; each read is atomic on its own.
  HistogramSnapshot Snapshot() const;
  bool attached() const { return cell_ != nullptr; }

 private:
  friend class HistogramFamily;
  explicit Histogram(internal::HistogramCell* cell) : cell_(cell) {}
  internal::HistogramCell* cell_ = nullptr;
};

// What every family was registered with.
struct FamilyInfo {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> label_names;
};

namespace internal {

// The part of a family the MetricSet renders. Families are made only by a
// MetricSet and never destroyed before it.
class Family {
 public:
  explicit Family(FamilyInfo info) : info_(std::move(info)) {}
  virtual ~Family() = default;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  const FamilyInfo& info() const { return info_; }

  // Appends # HELP, # TYPE and the samples, children in label-value order.
  // A family with no samples writes nothing, as the Go client does.
  void Render(const Collector& scrape, std::string* out) const;

 protected:
  virtual void AppendSamples(const Collector& scrape, std::string* out) const = 0;

  // The stored key for `values`: checked for arity, made valid UTF-8.
  absl::StatusOr<std::vector<std::string>> Key(LabelValues values) const;

 private:
  FamilyInfo info_;
};

// Children by label values. std::map keeps them sorted for stable output and
// never moves a cell, so handles stay valid.
template <typename Cell>
class ChildMap {
 public:
  template <typename MakeCell>
  Cell* FindOrCreate(std::vector<std::string> key, MakeCell make_cell) {
    absl::MutexLock lock(&mu_);
    auto it = cells_.find(key);
    if (it == cells_.end()) it = cells_.emplace(std::move(key), make_cell()).first;
    return it->second.get();
  }
  template <typename Visit>
  void ForEach(Visit visit) const {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, cell] : cells_) visit(key, *cell);
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Cell>> cells_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal

class CounterFamily final : public internal::Family {
 public:
  // The child for `label_values`, created on first use. Aborts with a
  // message if the number of values differs from the number of label names
  // (a programming error); TryWith returns InvalidArgument instead.
  Counter With(LabelValues label_values = {});
  absl::StatusOr<Counter> TryWith(LabelValues label_values);

 private:
  friend class MetricSet;
  using Family::Family;
  void AppendSamples(const Collector& scrape, std::string* out) const override;
  internal::ChildMap<internal::CounterCell> children_;
};

class GaugeFamily final : public internal::Family {
 public:
  Gauge With(LabelValues label_values = {});
  absl::StatusOr<Gauge> TryWith(LabelValues label_values);

 private:
  friend class MetricSet;
  using Family::Family;
  void AppendSamples(const Collector& scrape, std::string* out) const override;
  internal::ChildMap<internal::GaugeCell> children_;
};

class HistogramFamily final : public internal::Family {
 public:
  Histogram With(LabelValues label_values = {});
  absl::StatusOr<Histogram> TryWith(LabelValues label_values);
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  friend class MetricSet;
  HistogramFamily(FamilyInfo info, std::vector<double> bounds)
      : Family(std::move(info)), bounds_(std::move(bounds)) {}
  void AppendSamples(const Collector& scrape, std::string* out) const override;
  const std::vector<double> bounds_;
  internal::ChildMap<internal::HistogramCell> children_;
};

// Bucket bounds: start, start*factor, ... (count of them).
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// Bucket bounds: start, start+width, ... (count of them).
std::vector<double> LinearBuckets(double start, double width, int count);
// Seconds, 100 µs to 10 s in 1-2.5-5 steps: queue, compute and end-to-end
// latency of a serving system fall inside this range.
std::vector<double> LatencyBuckets();

}  // namespace maitre::metrics
