#include "controller/dataplane/burst_pool_spec.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace maitre::controller {
namespace {

constexpr char kKeys[] =
    "warm, max, concurrency, busy_at, keep_warm_s, cores, memory_mb, price_per_request, "
    "price_per_hour";

absl::Status Bad(absl::string_view pair, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--burst-pool: \"", pair, "\" ", why,
                   " (docs/operations.md, \"The burst pool\")"));
}

}  // namespace

absl::StatusOr<BurstPool::Options> ParseBurstPoolSpec(absl::string_view spec) {
  BurstPool::Options o;
  o.type.name = "burst";
  o.type.market = WorkerType::Market::kBurst;
  o.type.cores = 1;
  o.type.memory_mb = 4096;
  o.type.price_per_hour = 0;
  // MArk's Lambda, 3.8x an on-demand instance's cost per request at full
  // load (MArk §3.1, Table 2; docs/experiments.md, "mark-provisioning").
  o.type.price_per_request = 4.31e-7;
  if (spec == "on") return o;
  double keep_warm_s = ToSeconds(o.keep_warm);
  for (absl::string_view pair : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.size() != 2) return Bad(pair, "is not key=value");
    const absl::string_view key = kv[0], value = kv[1];
    int* count = key == "warm"          ? &o.warm_workers
                 : key == "max"         ? &o.max_workers
                 : key == "concurrency" ? &o.concurrency
                 : key == "busy_at"     ? &o.busy_at
                 : key == "cores"       ? &o.type.cores
                                        : nullptr;
    double* amount = key == "keep_warm_s"         ? &keep_warm_s
                     : key == "price_per_request" ? &o.type.price_per_request
                     : key == "price_per_hour"    ? &o.type.price_per_hour
                                                  : nullptr;
    if (count != nullptr) {
      if (!absl::SimpleAtoi(value, count) || *count < 0 || *count > 1024) {
        return Bad(pair, "needs a whole number from 0 to 1024");
      }
    } else if (amount != nullptr) {
      if (!absl::SimpleAtod(value, amount) || !std::isfinite(*amount) || *amount < 0) {
        return Bad(pair, "needs a finite number, 0 or more");
      }
    } else if (key == "memory_mb") {
      if (!absl::SimpleAtoi(value, &o.type.memory_mb) || o.type.memory_mb < 1) {
        return Bad(pair, "needs a whole number of MB, 1 or more");
      }
    } else {
      return Bad(pair, absl::StrCat("has an unknown key; the keys are ", kKeys));
    }
  }
  if (o.max_workers < 1 || o.warm_workers > o.max_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--burst-pool: max (", o.max_workers, ") must be 1 or more and at least warm (",
        o.warm_workers, ")"));
  }
  if (o.concurrency < 1 || o.busy_at < 1 || o.type.cores < 1) {
    return absl::InvalidArgumentError(
        "--burst-pool: concurrency, busy_at and cores must be 1 or more");
  }
  if (keep_warm_s > 366 * 24 * 3600) {
    return absl::InvalidArgumentError("--burst-pool: keep_warm_s is at most a year");
  }
  o.keep_warm = FromSeconds(keep_warm_s);
  return o;
}

}  // namespace maitre::controller
