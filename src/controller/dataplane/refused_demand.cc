#include "controller/dataplane/refused_demand.h"

namespace maitre::controller {

void RefusedDemand::Add(const std::string& app, int64_t rows) {
  absl::MutexLock lock(&mu_);
  rows_[app] += rows;
}

std::map<std::string, int64_t> RefusedDemand::Take() {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int64_t> taken;
  taken.swap(rows_);
  return taken;
}

}  // namespace maitre::controller
