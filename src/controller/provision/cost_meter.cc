#include "controller/provision/cost_meter.h"

namespace maitre::controller {

void CostMeter::Record(const WorkerEvent& event) {
  if (types_.Find(event.type) == nullptr) return;
  absl::MutexLock lock(&mu_);
  switch (event.kind) {
    case WorkerEvent::Kind::kStarted:
      paid_[event.launch_token] = {event.type, event.at, std::nullopt};
      break;
    case WorkerEvent::Kind::kLost:
    case WorkerEvent::Kind::kRetired: {
      auto it = paid_.find(event.launch_token);
      if (it != paid_.end() && !it->second.until.has_value()) it->second.until = event.at;
      break;
    }
    case WorkerEvent::Kind::kReady:
    case WorkerEvent::Kind::kInterrupted:
      break;  // paid from its launch, until it ends, either way
  }
}

void CostMeter::ChargeRequest(const std::string& type) {
  if (types_.Find(type) == nullptr) return;
  absl::MutexLock lock(&mu_);
  ++requests_[type];
}

CostReport CostMeter::At(Nanos now) const {
  CostReport report;
  std::map<std::string, size_t> line_of;
  for (const WorkerType& t : types_.types()) {
    line_of[t.name] = report.lines.size();
    report.lines.push_back({t.name, MarketName(t.market)});
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [token, p] : paid_) {
    const WorkerType& type = *types_.Find(p.type);
    CostLine& line = report.lines[line_of[p.type]];
    // Whole blocks begun, each at the price in force when it began.
    line.cost += type.CostBetween(p.from, p.from, type.PaidUntil(p.from, p.until.value_or(now)));
    if (p.until.has_value()) {
      ++line.ended;
    } else {
      ++line.running;
      line.per_hour += type.PriceAt(now);
    }
  }
  for (const auto& [type, n] : requests_) {
    CostLine& line = report.lines[line_of[type]];
    line.requests = n;
    line.request_cost = static_cast<double>(n) * types_.Find(type)->price_per_request;
    line.cost += line.request_cost;
  }
  for (const CostLine& line : report.lines) {
    report.cost += line.cost;
    report.per_hour += line.per_hour;
  }
  return report;
}

}  // namespace maitre::controller
