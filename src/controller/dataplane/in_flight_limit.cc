#include "controller/dataplane/in_flight_limit.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace maitre::controller {

InFlightLimit::Permit& InFlightLimit::Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    Release();
    limit_ = other.limit_;
    other.limit_ = nullptr;
  }
  return *this;
}

void InFlightLimit::Permit::Release() {
  if (limit_ == nullptr) return;
  limit_->in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  limit_ = nullptr;
}

InFlightLimit::Permit InFlightLimit::TryAcquire() {
  const int64_t before = in_flight_.fetch_add(1, std::memory_order_acq_rel);
  if (limit_ > 0 && before >= limit_) {
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    return Permit();
  }
  return Permit(this);
}

std::string InFlightLimit::RefusalMessage() const {
  return absl::StrCat("the server is overloaded: ", limit_,
                      " queries are in flight, its limit (serve --max-in-flight); retry later");
}

int64_t InFlightLimit::DefaultLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 4096;
  const int64_t bytes = static_cast<int64_t>(pages) * page_size;
  return std::clamp<int64_t>(bytes / 16 / (64 * 1024), 256, 65536);
}

}  // namespace maitre::controller
