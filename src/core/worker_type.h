// Worker types: hardware classes with resources and a price
// (docs/architecture.md, "Vocabulary"). They play the part of cloud instance
// types in the papers.
//
// Thread-safety: value types; not synchronised.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/price_trace.h"
#include "core/time.h"

namespace maitre {

struct WorkerType {
  std::string name;
  int cores = 1;
  int64_t memory_mb = 0;
  double price_per_hour = 0;  // dollars
  // The price is charged in whole blocks of this much time from the
  // worker's start (a cloud's billing granularity: an hour, a minute); 0
  // charges by the second. What a worker costs when given back early, and
  // how long keeping it idle is free (docs/policies.md, "Greedy
  // provisioning (MArk)").
  Nanos billing_unit = 0;
  // How the worker is bought. A spot worker can be taken back by its
  // provider after an interruption notice (docs/operations.md, "Spot
  // interruptions"); an on-demand one cannot. A burst worker serves the
  // burst pool alone (docs/architecture.md, "The burst pool"), paid by the
  // query it answers (`price_per_request`) as well as by its lifetime.
  enum class Market { kOnDemand, kSpot, kBurst };
  Market market = Market::kOnDemand;
  double price_per_request = 0;  // dollars; burst workers
  // Where set, the price follows this trace (a spot market's; docs/
  // operations.md, "Spot prices") and `price_per_hour` is unused; the
  // trace's time 0 is the clock's `price_trace_origin` (the simulator's 0,
  // the server's start).
  std::shared_ptr<const PriceTrace> price_trace;
  Nanos price_trace_origin = 0;

  // Dollars an hour in force at clock time `t`.
  double PriceAt(Nanos t) const;
  // When a worker paid for from `paid_from` and given back at `until` is
  // paid to: the end of the last billing block begun (at least one), or
  // `until` when billed by the second.
  Nanos PaidUntil(Nanos paid_from, Nanos until) const;
  // Dollars for [from, to) of a worker paid for from `paid_from`: by the
  // second at the price in force, or, with billing blocks, each block at
  // the price in force when it began (as a cloud charges a spot hour at
  // its start), pro rata where [from, to) cuts a block.
  double CostBetween(Nanos paid_from, Nanos from, Nanos to) const;
};

// "on-demand", "spot" or "burst", as --worker-types and GET /v2/cluster/cost
// write it.
const char* MarketName(WorkerType::Market market);

class WorkerTypeTable {
 public:
  WorkerTypeTable() = default;
  explicit WorkerTypeTable(std::vector<WorkerType> types) : types_(std::move(types)) {}

  // The embedded default for a small CPU machine, priced in the ratio of
  // cloud CPU instances: cpu-1 (1 core, $0.0425/h) and cpu-2 (2 cores,
  // $0.085/h).
  static WorkerTypeTable Default();

  // Parses "name:cores:memory_mb:price_per_hour[:billing_s[:market]]
  // [,...]", market "on-demand" (the default) or "spot".
  static absl::StatusOr<WorkerTypeTable> Parse(absl::string_view spec);

  const WorkerType* Find(absl::string_view name) const;
  const std::vector<WorkerType>& types() const { return types_; }

 private:
  std::vector<WorkerType> types_;
};

}  // namespace maitre
