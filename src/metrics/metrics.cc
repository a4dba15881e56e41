#include "metrics/metrics.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "metrics/text_format.h"

namespace maitre::metrics {
namespace internal {

HistogramCell::HistogramCell(const double* bounds, size_t num_bounds)
    : bounds(bounds), num_bounds(num_bounds), counts(new std::atomic<uint64_t>[num_bounds + 1]) {
  for (size_t i = 0; i <= num_bounds; ++i) counts[i].store(0, std::memory_order_relaxed);
}

void Die(const std::string& message) {
  std::fprintf(stderr, "maitre::metrics: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

void Family::Render(const Collector& scrape, std::string* out) const {
  size_t start = out->size();
  out->append("# HELP ");
  out->append(info_.name);
  out->push_back(' ');
  AppendEscapedHelp(info_.help, out);
  out->append("\n# TYPE ");
  out->append(info_.name);
  out->push_back(' ');
  absl::string_view type = MetricTypeName(info_.type);
  out->append(type.data(), type.size());
  out->push_back('\n');
  size_t header_end = out->size();
  AppendSamples(scrape, out);
  if (out->size() == header_end) out->resize(start);
}

absl::StatusOr<std::vector<std::string>> Family::Key(LabelValues values) const {
  if (values.size() != info_.label_names.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric '", info_.name, "' takes ", info_.label_names.size(), " label values (",
        absl::StrJoin(info_.label_names, ", "), "), got ", values.size()));
  }
  std::vector<std::string> key;
  key.reserve(values.size());
  for (absl::string_view value : values) key.push_back(SanitizeUtf8(value));
  return key;
}

}  // namespace internal

double Counter::Value() const {
  if (cell_ == nullptr) return 0;
  return static_cast<double>(cell_->whole.load(std::memory_order_relaxed)) +
         cell_->fraction.load(std::memory_order_relaxed);
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot snapshot;
  if (cell_ == nullptr) {
    snapshot.cumulative_counts.push_back(0);
    return snapshot;
  }
  snapshot.bounds.assign(cell_->bounds, cell_->bounds + cell_->num_bounds);
  uint64_t running = 0;
  for (size_t i = 0; i <= cell_->num_bounds; ++i) {
    running += cell_->counts[i].load(std::memory_order_relaxed);
    snapshot.cumulative_counts.push_back(running);
  }
  snapshot.count = running;
  snapshot.sum = cell_->sum.load(std::memory_order_relaxed);
  return snapshot;
}

absl::StatusOr<Counter> CounterFamily::TryWith(LabelValues label_values) {
  absl::StatusOr<std::vector<std::string>> key = Key(label_values);
  if (!key.ok()) return key.status();
  return Counter(children_.FindOrCreate(*std::move(key),
                                        [] { return std::make_unique<internal::CounterCell>(); }));
}

Counter CounterFamily::With(LabelValues label_values) {
  absl::StatusOr<Counter> child = TryWith(label_values);
  if (!child.ok()) internal::Die(std::string(child.status().message()));
  return *child;
}

void CounterFamily::AppendSamples(const Collector&, std::string* out) const {
  std::string value;
  children_.ForEach([&](const std::vector<std::string>& labels, const internal::CounterCell& cell) {
    uint64_t whole = cell.whole.load(std::memory_order_relaxed);
    double fraction = cell.fraction.load(std::memory_order_relaxed);
    value.clear();
    // Integer-only counters print exactly, even past 2^53.
    if (fraction == 0) {
      AppendUint(whole, &value);
    } else {
      AppendDouble(static_cast<double>(whole) + fraction, &value);
    }
    AppendSample(info().name, "", info().label_names, labels, "", "", value, out);
  });
}

absl::StatusOr<Gauge> GaugeFamily::TryWith(LabelValues label_values) {
  absl::StatusOr<std::vector<std::string>> key = Key(label_values);
  if (!key.ok()) return key.status();
  return Gauge(children_.FindOrCreate(*std::move(key),
                                      [] { return std::make_unique<internal::GaugeCell>(); }));
}

Gauge GaugeFamily::With(LabelValues label_values) {
  absl::StatusOr<Gauge> child = TryWith(label_values);
  if (!child.ok()) internal::Die(std::string(child.status().message()));
  return *child;
}

void GaugeFamily::AppendSamples(const Collector&, std::string* out) const {
  std::string value;
  children_.ForEach([&](const std::vector<std::string>& labels, const internal::GaugeCell& cell) {
    value.clear();
    AppendDouble(cell.value.load(std::memory_order_relaxed), &value);
    AppendSample(info().name, "", info().label_names, labels, "", "", value, out);
  });
}

absl::StatusOr<Histogram> HistogramFamily::TryWith(LabelValues label_values) {
  absl::StatusOr<std::vector<std::string>> key = Key(label_values);
  if (!key.ok()) return key.status();
  return Histogram(children_.FindOrCreate(*std::move(key), [this] {
    return std::make_unique<internal::HistogramCell>(bounds_.data(), bounds_.size());
  }));
}

Histogram HistogramFamily::With(LabelValues label_values) {
  absl::StatusOr<Histogram> child = TryWith(label_values);
  if (!child.ok()) internal::Die(std::string(child.status().message()));
  return *child;
}

void HistogramFamily::AppendSamples(const Collector&, std::string* out) const {
  // The `le` values are the same for every child: format them once.
  std::vector<std::string> le;
  for (double bound : bounds_) le.push_back(FormatDouble(bound));
  le.push_back("+Inf");
  const std::string& name = info().name;
  const std::vector<std::string>& label_names = info().label_names;
  std::string value;
  children_.ForEach([&](const std::vector<std::string>& labels, const internal::HistogramCell& cell) {
    uint64_t running = 0;
    for (size_t i = 0; i <= cell.num_bounds; ++i) {
      running += cell.counts[i].load(std::memory_order_relaxed);
      value.clear();
      AppendUint(running, &value);
      AppendSample(name, "_bucket", label_names, labels, "le", le[i], value, out);
    }
    value.clear();
    AppendDouble(cell.sum.load(std::memory_order_relaxed), &value);
    AppendSample(name, "_sum", label_names, labels, "", "", value, out);
    value.clear();
    AppendUint(running, &value);
    AppendSample(name, "_count", label_names, labels, "", "", value, out);
  });
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

std::vector<double> LinearBuckets(double start, double width, int count) {
  std::vector<double> bounds;
  for (int i = 0; i < count; ++i) bounds.push_back(start + i * width);
  return bounds;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,    5,     10};
}

}  // namespace maitre::metrics
