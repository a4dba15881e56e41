#include "core/worker_type.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace maitre {

WorkerTypeTable WorkerTypeTable::Default() {
  return WorkerTypeTable({
      {"cpu-1", 1, 4096, 0.0425},
      {"cpu-2", 2, 8192, 0.085},
  });
}

const char* MarketName(WorkerType::Market market) {
  switch (market) {
    case WorkerType::Market::kSpot:
      return "spot";
    case WorkerType::Market::kBurst:
      return "burst";
    case WorkerType::Market::kOnDemand:
      break;
  }
  return "on-demand";
}

absl::StatusOr<WorkerTypeTable> WorkerTypeTable::Parse(absl::string_view spec) {
  std::vector<WorkerType> types;
  for (absl::string_view row : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(row, ':');
    WorkerType t;
    double billing_s = 0;
    const bool market_ok = f.size() < 6 || f[5] == "spot" || f[5] == "on-demand";
    if (f.size() < 4 || f.size() > 6 || !market_ok || f[0].empty() ||
        !absl::SimpleAtoi(f[1], &t.cores) ||
        !absl::SimpleAtoi(f[2], &t.memory_mb) || !absl::SimpleAtod(f[3], &t.price_per_hour) ||
        t.cores < 1 || t.memory_mb < 1 || t.price_per_hour < 0 ||
        (f.size() >= 5 && (!absl::SimpleAtod(f[4], &billing_s) || !(billing_s >= 0) ||
                           billing_s > 366 * 24 * 3600))) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad worker type \"", row,
                       "\"; expected name:cores:memory_mb:price_per_hour[:billing_s[:market]], "
                       "with billing_s between 0 (by the second) and a year and market "
                       "on-demand or spot"));
    }
    t.billing_unit = FromSeconds(billing_s);
    if (f.size() == 6 && f[5] == "spot") t.market = WorkerType::Market::kSpot;
    t.name = std::string(f[0]);
    types.push_back(std::move(t));
  }
  if (types.empty()) return absl::InvalidArgumentError("no worker types given");
  return WorkerTypeTable(std::move(types));
}

double WorkerType::PriceAt(Nanos t) const {
  return price_trace != nullptr ? price_trace->PriceAt(t - price_trace_origin) : price_per_hour;
}

Nanos WorkerType::PaidUntil(Nanos paid_from, Nanos until) const {
  if (billing_unit <= 0) return until;
  const Nanos held = std::max<Nanos>(0, until - paid_from);
  return paid_from + std::max<Nanos>(1, (held + billing_unit - 1) / billing_unit) * billing_unit;
}

double WorkerType::CostBetween(Nanos paid_from, Nanos from, Nanos to) const {
  from = std::max(from, paid_from);
  if (to <= from) return 0;
  if (billing_unit <= 0) {
    return price_trace != nullptr
               ? price_trace->DollarsBetween(from - price_trace_origin, to - price_trace_origin)
               : price_per_hour * ToSeconds(to - from) / 3600.0;
  }
  double dollars = 0;
  for (Nanos block = paid_from + (from - paid_from) / billing_unit * billing_unit; block < to;
       block += billing_unit) {
    const Nanos start = std::max(from, block), end = std::min(to, block + billing_unit);
    dollars += PriceAt(block) * ToSeconds(end - start) / 3600.0;
  }
  return dollars;
}

const WorkerType* WorkerTypeTable::Find(absl::string_view name) const {
  for (const WorkerType& t : types_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace maitre
