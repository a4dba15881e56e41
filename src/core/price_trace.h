// A spot price trace (docs/operations.md, "Spot prices"): a worker type's
// price over time as a step function, read from a CSV of
// `time_s,price_per_hour` rows. Each row's price is in force from its time
// until the next row's; the last row's from its time on.
//
// The rules a trace must keep (each broken one is an InvalidArgument error
// naming the file, the line and the problem):
//   - at least one row; an optional header `time_s,price_per_hour`, blank
//     lines and lines starting with '#' are skipped;
//   - two fields a row, both numbers; times finite, prices finite and not
//     negative;
//   - the first row at time 0 (no price is known before it), and each
//     later time greater than the one before (no gaps of order);
//   - where the length of the run is known (the simulator), the last row at
//     or after its end (`CheckCovers`): a trace shorter than the run would
//     leave its tail priced by a guess.
//
// Thread-safety: immutable after Parse; safe to share.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/time.h"

namespace maitre {

class PriceTrace {
 public:
  struct Step {
    Nanos at = 0;  // from the trace's start
    double price_per_hour = 0;
    int line = 0;  // in the file, from 1
  };

  // `source` names the file in errors.
  static absl::StatusOr<PriceTrace> Parse(absl::string_view csv, const std::string& source);
  // Parse of the file's contents; NotFound (or the read's error) naming it.
  static absl::StatusOr<PriceTrace> Load(const std::string& path);

  // InvalidArgument, naming the file and its last line, when the trace ends
  // before `end` (from its start).
  absl::Status CheckCovers(Nanos end) const;

  // The price in force `t` after the trace's start (the first one before it).
  double PriceAt(Nanos t) const;
  // Dollars for holding one worker over [from, to), by the second, at the
  // prices in force.
  double DollarsBetween(Nanos from, Nanos to) const;

  const std::vector<Step>& steps() const { return steps_; }
  const std::string& source() const { return source_; }

 private:
  std::vector<Step> steps_;
  std::string source_;
};

}  // namespace maitre
