#include "controller/dataplane/service_level.h"

namespace maitre::controller {

void ServiceLevel::Add(const std::string& app, bool within) {
  absl::MutexLock lock(&mu_);
  control::ServiceCount& c = counts_[app];
  ++c.answered;
  c.within += within;
}

std::map<std::string, control::ServiceCount> ServiceLevel::Take() {
  absl::MutexLock lock(&mu_);
  std::map<std::string, control::ServiceCount> taken;
  taken.swap(counts_);
  return taken;
}

}  // namespace maitre::controller
