// The controller's bound on queries in flight (docs/architecture.md,
// "Admission and overload"): every query the front-ends accept holds one
// permit from arrival until it is answered. With all permits taken, a new
// query is refused (429) before its body is decoded, so whatever the
// offered load, the controller holds at most `limit` decoded queries and
// their answers, and its memory stays bounded.
//
// Thread-safety: thread-safe; TryAcquire and a permit's release are one
// atomic operation each.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace maitre::controller {

class InFlightLimit {
 public:
  // Releases its slot when destroyed (or Release()d); movable, not copyable.
  class Permit {
   public:
    Permit() = default;
    Permit(Permit&& other) noexcept : limit_(other.limit_) { other.limit_ = nullptr; }
    Permit& operator=(Permit&& other) noexcept;
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { Release(); }
    bool held() const { return limit_ != nullptr; }
    void Release();

   private:
    friend class InFlightLimit;
    explicit Permit(InFlightLimit* limit) : limit_(limit) {}
    InFlightLimit* limit_ = nullptr;
  };

  // `limit` <= 0: no bound.
  explicit InFlightLimit(int64_t limit) : limit_(limit) {}

  // A held permit, or an empty one when `limit` queries are in flight.
  Permit TryAcquire();
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }
  // Why a query was refused, for its 429.
  std::string RefusalMessage() const;

  // A default for `limit` from the host's memory: a sixteenth of it, at an
  // allowance of 64 KiB per query in flight (a decoded request, its answer
  // and the bookkeeping around them), between 256 and 65,536.
  static int64_t DefaultLimit();

 private:
  const int64_t limit_;
  std::atomic<int64_t> in_flight_{0};
};

}  // namespace maitre::controller
