// What the cluster's workers have cost and cost now (docs/api.md,
// "GET /v2/cluster/cost"), from the provider's lifecycle events and each
// worker type's price and billing unit: a worker is paid from its launch
// (kStarted) until it ends (kLost, kRetired), in whole billing blocks
// begun, as a cloud charges (docs/policies.md, "Greedy provisioning
// (MArk)"); by the second when the type's unit is 0. A type with a price
// trace (docs/operations.md, "Spot prices") is charged each block at the
// price in force when the block began; `per_hour` is the price now. A
// burst worker (docs/architecture.md, "The burst pool") is paid, besides,
// its type's `price_per_request` for each query it was sent.
//
// Thread-safety: thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "controller/provision/worker_provider.h"
#include "core/worker_type.h"

namespace maitre::controller {

// The cost of one worker type (and so one market).
struct CostLine {
  std::string type;
  std::string market;  // MarketName
  int running = 0;     // workers paid for now (starting ones included)
  int ended = 0;       // workers that have ended
  double cost = 0;     // dollars so far, blocks begun and requests included
  double per_hour = 0; // dollars an hour for those running now
  int64_t requests = 0;  // queries charged by the request (burst workers)
  double request_cost = 0;  // what those queries cost, part of `cost`
};

struct CostReport {
  double cost = 0;
  double per_hour = 0;
  std::vector<CostLine> lines;  // every type in the table, in its order
};

class CostMeter {
 public:
  explicit CostMeter(WorkerTypeTable types) : types_(std::move(types)) {}

  // A provider's event (WorkerProvider::OnEvent); types not in the table
  // are ignored.
  void Record(const WorkerEvent& event);
  // A query sent to a worker of `type`, charged its `price_per_request`;
  // types not in the table are ignored.
  void ChargeRequest(const std::string& type);
  CostReport At(Nanos now) const;

 private:
  struct Paid {
    std::string type;
    Nanos from = 0;
    std::optional<Nanos> until;
  };
  const WorkerTypeTable types_;
  mutable absl::Mutex mu_;
  std::map<std::string, Paid> paid_ ABSL_GUARDED_BY(mu_);  // by launch token
  std::map<std::string, int64_t> requests_ ABSL_GUARDED_BY(mu_);  // by type
};

}  // namespace maitre::controller
