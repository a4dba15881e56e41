// Which metric and label names a MetricSet accepts. Beyond the grammar of the
// exposition format, it enforces the conventions that `promtool check
// metrics` lints for (counters end in _total, base units, no camelCase, ...),
// so a name that would fail the /metrics acceptance check is refused with
// InvalidArgument when it is registered, in the unit test of whoever
// registers it, instead of in an end-to-end scrape.
//
// Thread-safety: stateless free functions; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace maitre::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge" or "histogram", as written on a # TYPE line.
absl::string_view MetricTypeName(MetricType type);

// OK, or InvalidArgument saying what is wrong and what to write instead.
// Rules: [a-zA-Z_][a-zA-Z0-9_]* (':' is legal in the format but reserved for
// recording rules); snake_case; counters end in _total and nothing else
// does; only histograms end in _bucket, _count or _sum; no type word
// (_gauge, _counter, ...) after the first word; base units only (seconds not
// milliseconds, bytes not kilobytes) and no abbreviated units (_ms, _s, _b).
absl::Status ValidateMetricName(absl::string_view name, MetricType type);

// Rules: [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for
// Prometheus), snake_case, not "le" (a histogram's bucket label) or
// "quantile" (a summary's), and no name twice.
absl::Status ValidateLabelNames(const std::vector<std::string>& label_names);

}  // namespace maitre::metrics
