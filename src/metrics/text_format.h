// Low-level pieces of the Prometheus text exposition format, version 0.0.4:
// number formatting, escaping, and one sample line. MetricSet::Render builds
// on these; they are public so other exporters and tests can reuse them.
//
// Thread-safety: stateless free functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace maitre::metrics {

// Formats a sample value the way Prometheus' own Go client does
// (strconv.FormatFloat(v, 'g', -1, 64)): the shortest digits that read back
// as the same double, in plain notation when the decimal exponent is in
// [-4, 21) and as d.ddde±XX otherwise; "NaN", "+Inf" and "-Inf" for the
// special values. Matching the Go client matters for `le` labels: a
// dashboard that selects le="0.0001" must find our bucket.
std::string FormatDouble(double value);
void AppendDouble(double value, std::string* out);

// Decimal digits of an integer counter, exact beyond 2^53.
void AppendUint(uint64_t value, std::string* out);

// Label values: backslash, double quote and line feed become \\, \" and \n.
void AppendEscapedLabelValue(absl::string_view value, std::string* out);

// HELP text: backslash and line feed become \\ and \n (quotes stay as is).
void AppendEscapedHelp(absl::string_view help, std::string* out);

// The format is UTF-8. Label values and help text may come from users (model
// names) or from files, so each byte that is not part of a well-formed UTF-8
// sequence is replaced with U+FFFD rather than breaking every scrape.
std::string SanitizeUtf8(absl::string_view text);

// Appends `<name><suffix>{n1="v1",...[,extra_name="extra_value"]} <value>\n`.
// `label_names` and `label_values` have the same length; the braces are left
// out when there are no labels at all. `extra_name` (may be empty) carries a
// histogram's `le`. Values are escaped here; names must already be valid.
void AppendSample(absl::string_view name, absl::string_view suffix,
                  const std::vector<std::string>& label_names,
                  const std::vector<std::string>& label_values, absl::string_view extra_name,
                  absl::string_view extra_value, absl::string_view value, std::string* out);

}  // namespace maitre::metrics
