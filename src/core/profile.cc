#include "core/profile.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace maitre {

absl::StatusOr<Profile> Profile::Create(std::vector<LatencyPoint> points, double load_ms,
                                        double memory_mb) {
  if (points.empty()) return absl::InvalidArgumentError("a profile needs at least one point");
  std::sort(points.begin(), points.end(),
            [](const LatencyPoint& a, const LatencyPoint& b) { return a.batch < b.batch; });
  for (size_t i = 0; i < points.size(); ++i) {
    const LatencyPoint& p = points[i];
    if (p.batch < 1 || (i > 0 && p.batch == points[i - 1].batch)) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile batch sizes must be distinct and >= 1, got ", p.batch));
    }
    if (!(p.p50_ms > 0) || !(p.p99_ms >= p.p50_ms)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "profile at batch ", p.batch, " needs 0 < p50 <= p99, got ", p.p50_ms, " / ", p.p99_ms));
    }
  }
  if (load_ms < 0 || memory_mb < 0) {
    return absl::InvalidArgumentError("load time and memory must be non-negative");
  }
  Profile profile;
  profile.points_ = std::move(points);
  profile.load_ms_ = load_ms;
  profile.memory_mb_ = memory_mb;
  return profile;
}

Profile Profile::FastestOf(const Profile& a, const Profile& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  Profile merged;
  auto x = a.points_.begin(), y = b.points_.begin();
  while (x != a.points_.end() || y != b.points_.end()) {
    if (y == b.points_.end() || (x != a.points_.end() && x->batch < y->batch)) {
      merged.points_.push_back(*x++);
    } else if (x == a.points_.end() || y->batch < x->batch) {
      merged.points_.push_back(*y++);
    } else {
      merged.points_.push_back(y->p50_ms < x->p50_ms ? *y : *x);
      ++x;
      ++y;
    }
  }
  merged.load_ms_ = std::min(a.load_ms_, b.load_ms_);
  merged.memory_mb_ = std::max(a.memory_mb_, b.memory_mb_);
  return merged;
}

double Profile::Interpolate(int batch, bool p99) const {
  if (points_.empty()) return 0;
  auto value = [p99](const LatencyPoint& p) { return p99 ? p.p99_ms : p.p50_ms; };
  if (batch <= points_.front().batch) return value(points_.front());
  auto hi = std::lower_bound(points_.begin(), points_.end(), batch,
                             [](const LatencyPoint& p, int b) { return p.batch < b; });
  if (hi != points_.end() && hi->batch == batch) return value(*hi);
  if (hi == points_.end()) {
    const LatencyPoint& last = points_.back();
    if (points_.size() == 1) return value(last) * batch / last.batch;
    const LatencyPoint& prev = points_[points_.size() - 2];
    double slope = (value(last) - value(prev)) / (last.batch - prev.batch);
    return value(last) + std::max(0.0, slope) * (batch - last.batch);
  }
  const LatencyPoint& lo = *(hi - 1);
  double t = static_cast<double>(batch - lo.batch) / (hi->batch - lo.batch);
  return value(lo) + t * (value(*hi) - value(lo));
}

int Profile::MaxBatchWithin(double latency_ms) const {
  int best = 0;
  // Latency is close to monotone in batch but measurement noise can make it
  // dip; scanning every size keeps the answer exact without assuming order.
  for (int b = 1; b <= max_batch(); ++b) {
    if (LatencyAt(b) <= latency_ms) best = b;
  }
  return best;
}

double Profile::ThroughputAt(int batch) const {
  double ms = LatencyAt(batch);
  return ms > 0 ? 1000.0 * batch / ms : 0;
}

double Profile::AnswerBehindMs(int64_t ahead_rows, int batch, int replicas) const {
  batch = std::max(1, batch);
  const double service_ms = LatencyAt(batch);
  if (ahead_rows <= 0) return service_ms;
  return static_cast<double>(ahead_rows) * service_ms /
             (static_cast<double>(batch) * std::max(1, replicas)) +
         service_ms;
}

double Profile::SaturationQps(double slo_ms) const {
  if (points_.empty() || LatencyAt(1) > slo_ms) return 0;
  int limit = MaxBatchWithin(slo_ms / 2);
  if (limit == 0) return ThroughputAt(1);
  double best = 0;
  for (int b = 1; b <= limit; ++b) best = std::max(best, ThroughputAt(b));
  return best;
}

}  // namespace maitre
