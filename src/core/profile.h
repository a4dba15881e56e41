// The measured behaviour of one variant on one worker type, as a value that
// answers the planners' questions (after Nexus's ModelProfile;
// docs/architecture.md, "Conventions"). Every policy and the simulator take
// profiles as arguments.
//
// Thread-safety: immutable after Create; safe to share across threads.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace maitre {

struct LatencyPoint {
  int batch = 1;
  double p50_ms = 0;
  double p99_ms = 0;
};

class Profile {
 public:
  Profile() = default;

  // Points need batch >= 1, strictly increasing batches, 0 < p50 <= p99.
  static absl::StatusOr<Profile> Create(std::vector<LatencyPoint> points, double load_ms,
                                        double memory_mb);

  // Two measurements of the same variant on the same worker type, taken at
  // different times, combined: at each batch size the one with the lower p50
  // (with its own p99), whatever else ran on the host only ever adds time;
  // a batch size only one of them reached is kept from that one. Load time
  // is the lower of the two, memory the higher (a process that loaded the
  // variant before reuses memory, so a later measurement can see less).
  static Profile FastestOf(const Profile& a, const Profile& b);

  bool empty() const { return points_.empty(); }
  const std::vector<LatencyPoint>& points() const { return points_; }
  // How long a load takes before the instance serves: its executor made
  // and warmed up at each batch size (the worker's InstanceManager).
  double load_ms() const { return load_ms_; }
  double memory_mb() const { return memory_mb_; }
  int max_batch() const { return points_.empty() ? 0 : points_.back().batch; }

  // Median latency of one batch of `batch` queries. Linear between measured
  // sizes; below the smallest it is the smallest's; above the largest it
  // follows the last segment's slope (never decreasing).
  double LatencyAt(int batch) const { return Interpolate(batch, /*p99=*/false); }
  double P99At(int batch) const { return Interpolate(batch, /*p99=*/true); }

  // The largest batch, up to max_batch(), whose LatencyAt fits within
  // `latency_ms`; 0 when even batch 1 does not.
  int MaxBatchWithin(double latency_ms) const;

  // Queries per second when full batches of `batch` run back to back.
  double ThroughputAt(int batch) const;

  // The most rows one batch of an instance holds: the cap its worker
  // reports (`reported`; 0 or less: none reported), at most the profile's
  // largest batch, as the worker caps its batches there too.
  int BatchCap(int reported) const {
    const int largest = max_batch() > 0 ? max_batch() : 1;
    return reported > 0 && reported < largest ? reported : largest;
  }

  // Milliseconds until one more query is answered behind `ahead_rows`
  // rows queued at an instance whose `replicas` run batches of `batch`
  // rows: the rows ahead drain at that batch's throughput over the
  // replicas, then the query's own batch runs. Which batch to assume is
  // the caller's estimate (admission: the batch the queue allows;
  // selection: the instance's recent mean batch, or the queue's batch when
  // that is larger and answers sooner; docs/policies.md, "Variant
  // selection").
  double AnswerBehindMs(int64_t ahead_rows, int batch, int replicas) const;

  // The highest rate one instance sustains while its queries meet `slo_ms`.
  // A query may arrive just after a batch started and then ride in the next
  // one, so a batch size b is usable when 2·LatencyAt(b) <= slo_ms (the
  // Nexus rule). If no batch passes that test but batch 1 alone fits the SLO,
  // batch 1's throughput is returned; 0 if batch 1 does not fit.
  double SaturationQps(double slo_ms) const;

 private:
  double Interpolate(int batch, bool p99) const;

  std::vector<LatencyPoint> points_;
  double load_ms_ = 0;
  double memory_mb_ = 0;
};

}  // namespace maitre
