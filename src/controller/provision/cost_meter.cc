#include "controller/provision/cost_meter.h"

#include <algorithm>

namespace maitre::controller {

double BilledCost(const WorkerType& type, Nanos held) {
  held = std::max<Nanos>(held, 0);
  Nanos billed = held;
  if (type.billing_unit > 0) {
    // A block is paid when it begins: a worker launched is one block's
    // cost at once.
    const Nanos blocks = std::max<Nanos>(1, (held + type.billing_unit - 1) / type.billing_unit);
    billed = blocks * type.billing_unit;
  }
  return type.price_per_hour * ToSeconds(billed) / 3600.0;
}

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
    line.cost += BilledCost(type, p.until.value_or(now) - p.from);
    if (p.until.has_value()) {
      ++line.ended;
    } else {
      ++line.running;
      line.per_hour += type.price_per_hour;
    }
  }
  for (const CostLine& line : report.lines) {
    report.cost += line.cost;
    report.per_hour += line.per_hour;
  }
  return report;
}

}  // namespace maitre::controller
