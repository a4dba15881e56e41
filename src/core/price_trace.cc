#include "core/price_trace.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/file_util.h"

namespace maitre {
namespace {

absl::Status BadLine(const std::string& source, int line, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("price trace ", source, ", line ", line, ": ", problem));
}

}  // namespace

absl::StatusOr<PriceTrace> PriceTrace::Parse(absl::string_view csv, const std::string& source) {
  PriceTrace trace;
  trace.source_ = source;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(csv, '\n')) {
    ++line_number;
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    for (absl::string_view& field : f) field = absl::StripAsciiWhitespace(field);
    if (trace.steps_.empty() && f.size() == 2 && f[0] == "time_s" && f[1] == "price_per_hour") {
      continue;  // the header
    }
    double time_s = 0, price = 0;
    if (f.size() != 2 || !absl::SimpleAtod(f[0], &time_s) || !absl::SimpleAtod(f[1], &price)) {
      return BadLine(source, line_number,
                     absl::StrCat("expected time_s,price_per_hour (two numbers), not \"", line,
                                  "\""));
    }
    if (!std::isfinite(time_s) || std::fabs(time_s) > 1e9) {
      return BadLine(source, line_number, "the time must be a finite number of seconds");
    }
    if (!std::isfinite(price) || price < 0) {
      return BadLine(source, line_number,
                     absl::StrCat("the price must be finite and not negative, not ", f[1]));
    }
    const Nanos at = FromSeconds(time_s);
    if (trace.steps_.empty() && at != 0) {
      return BadLine(source, line_number,
                     absl::StrFormat("the first row must be at time 0, not %g s: no price is "
                                     "known before it",
                                     time_s));
    }
    if (!trace.steps_.empty() && at <= trace.steps_.back().at) {
      return BadLine(source, line_number,
                     absl::StrFormat("time %g s is not after the row before (line %d, %g s): "
                                     "times must increase",
                                     time_s, trace.steps_.back().line,
                                     ToSeconds(trace.steps_.back().at)));
    }
    trace.steps_.push_back({at, price, line_number});
  }
  if (trace.steps_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("price trace ", source, ": no rows (expected time_s,price_per_hour rows, "
                     "the first at time 0)"));
  }
  return trace;
}

absl::StatusOr<PriceTrace> PriceTrace::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("price trace ", path, ": ", text.status().message()));
  }
  return Parse(*text, path);
}

absl::Status PriceTrace::CheckCovers(Nanos end) const {
  const Step& last = steps_.back();
  if (last.at >= end) return absl::OkStatus();
  return BadLine(source_, last.line,
                 absl::StrFormat("the trace ends at %g s, before the run's end at %g s: add a "
                                 "row at or after %g s",
                                 ToSeconds(last.at), ToSeconds(end), ToSeconds(end)));
}

double PriceTrace::PriceAt(Nanos t) const {
  auto after = std::upper_bound(steps_.begin(), steps_.end(), t,
                                [](Nanos at, const Step& s) { return at < s.at; });
  return after == steps_.begin() ? steps_.front().price_per_hour
                                 : std::prev(after)->price_per_hour;
}

double PriceTrace::DollarsBetween(Nanos from, Nanos to) const {
  double dollars = 0;
  for (size_t i = 0; i < steps_.size() && from < to; ++i) {
    const Nanos step_end = i + 1 < steps_.size() ? steps_[i + 1].at : kInfiniteFuture;
    if (step_end <= from) continue;
    const Nanos until = std::min(to, step_end);
    dollars += PriceAt(from) * ToSeconds(until - from) / 3600.0;
    from = until;
  }
  return dollars;
}

}  // namespace maitre
