#include "controller/serve_flags.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/price_trace.h"
#include "core/status_macros.h"

namespace maitre::controller {

control::MarkOptions MarkOf(const ServeOptions& options) {
  control::MarkOptions mark;
  mark.predictor = options.mark_predictor;
  // A day bounds what a launch time, unit or cool-down could sensibly be
  // (and keeps the nanoseconds far from overflow). Out of range, -1, which
  // ValidateMarkOptions refuses.
  auto seconds = [](double s) { return s >= 0 && s <= 86400 ? FromSeconds(s) : Nanos{-1}; };
  mark.default_launch_time = seconds(options.mark_launch_s);
  mark.sl_min = options.mark_sl_min;
  mark.windows.unit = seconds(options.mark_unit_s);
  mark.cool_down = seconds(options.mark_cool_down_s);
  return mark;
}

std::string DefaultDataDir() {
  if (const char* dir = std::getenv("MAITRE_DATA_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr ? home : "/tmp", "/.local/share/maitre");
}

std::string SelfExecutable() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "maitre" : path.string();
}

absl::StatusOr<std::vector<std::pair<std::string, int>>> ParseWorkerCounts(
    absl::string_view spec, const WorkerTypeTable& types) {
  std::vector<std::pair<std::string, int>> counts;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(item, ':');
    int count = 0;
    if (f.size() != 2 || !absl::SimpleAtoi(f[1], &count) || count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad --workers entry \"", item, "\"; expected type:count, e.g. cpu-1:2"));
    }
    if (types.Find(f[0]) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--workers names unknown worker type \"", f[0], "\""));
    }
    counts.push_back({std::string(f[0]), count});
  }
  return counts;
}

absl::StatusOr<WorkerTypeTable> WithPriceTraces(absl::string_view spec,
                                                const WorkerTypeTable& types, Nanos origin) {
  std::vector<WorkerType> priced = types.types();
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos || eq == 0 || eq + 1 == item.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad --price-traces entry \"", item,
                       "\"; expected TYPE=FILE, e.g. c5.large=spot.csv"));
    }
    const absl::string_view name = item.substr(0, eq);
    auto type = std::find_if(priced.begin(), priced.end(),
                             [&](const WorkerType& t) { return t.name == name; });
    if (type == priced.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--price-traces names unknown worker type \"", name, "\""));
    }
    if (type->market != WorkerType::Market::kSpot) {
      return absl::InvalidArgumentError(
          absl::StrCat("--price-traces: worker type \"", name,
                       "\" is on-demand; only a spot type's price follows a trace"));
    }
    const std::string file(item.substr(eq + 1));
    MAITRE_ASSIGN_OR_RETURN(PriceTrace trace, PriceTrace::Load(file));
    type->price_trace = std::make_shared<const PriceTrace>(std::move(trace));
    type->price_trace_origin = origin;
  }
  return WorkerTypeTable(std::move(priced));
}

}  // namespace maitre::controller
