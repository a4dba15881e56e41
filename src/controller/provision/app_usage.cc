#include "controller/provision/app_usage.h"

#include <algorithm>

namespace maitre::controller {

int64_t AppUsed::requests() const {
  int64_t n = 0;
  for (const auto& [type, count] : requests_by_type) n += count;
  return n;
}

void AppUsage::AddCompute(absl::string_view app, int64_t compute_us, int batch_size) {
  const double share_s = static_cast<double>(compute_us) / std::max(1, batch_size) / 1e6;
  absl::MutexLock lock(&mu_);
  UsedBy(app).compute_s += share_s;
}

void AppUsage::AddRequest(absl::string_view app, absl::string_view type) {
  absl::MutexLock lock(&mu_);
  ++UsedBy(app).requests_by_type[std::string(type)];
}

AppUsed& AppUsage::UsedBy(absl::string_view app) {
  // Looked up without a copy of the name: only an app's first query makes one.
  auto it = used_.find(app);
  if (it == used_.end()) it = used_.emplace(std::string(app), AppUsed{}).first;
  return it->second;
}

std::map<std::string, AppUsed> AppUsage::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return {used_.begin(), used_.end()};
}

}  // namespace maitre::controller
