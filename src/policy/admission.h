// Admission control on the data path (docs/architecture.md, "Admission and
// overload"): before a query is sent, estimate when each instance that could
// serve it would answer; if none would answer before the query's deadline,
// the query is refused at once (429, RESOURCE_EXHAUSTED) instead of waiting
// in a queue it cannot leave in time. A refusal costs microseconds, so under
// overload the controller keeps answering and its queues stay short.
//
// The estimate for one instance, from the variant's profile on its worker
// type:
//     ahead   = max(0, waiting − replicas + 1) · rows  (a free replica takes
//               one; the queries ahead are taken to be this one's size)
//     b       = clamp(max(ahead, rows), 1, max(cap, rows))  (the batch, in
//               rows, the queue allows; cap is the instance's batching cap,
//               at most the profile's largest batch, Profile::BatchCap; a
//               query wider than it runs alone)
//     finish  = ready_in + slowdown · (ahead · LatencyAt(b) / (b · replicas)
//               + LatencyAt(b)) + overhead   (slowdown, overhead: only while
//                                             waiting > 0)
// (Profile::AnswerBehindMs at that batch)
// `waiting` counts the queries this controller already sent there, and
// `overhead` is what this controller's recent round trips there took beyond
// the worker's own queue and compute time: its own CPU and the network. On
// a host whose CPU is the bottleneck (the front-end, not the worker), that
// is where the time goes, and no profile shows it. `slowdown` is how much
// slower than its profile the worker has recently computed (a moving mean
// of compute time ÷ the profile's at that batch): profiles are measured
// alone, and a worker sharing its host under load computes slower, so
// without it the estimate finds room that is not there and the excess is
// answered 504 at its deadline instead of 429 at once. An instance with nothing
// in flight ignores it: no reply is coming to bring a stale figure up to
// date, so after a flood the first query is let through to measure again. Unlike
// the selection policy's estimate (policy/selection.h), which takes the
// instance's recent mean batch unless the queue's batch is larger and
// answers sooner, this
// one lets the queue form the batches it would form: a deep queue drains in
// large batches, so the estimate does not overstate the wait just when the
// queue grows (which would refuse work that the instance can still serve in
// time). The cap matters as much: a worker told to batch at most 1 drains
// its queue one query at a time, whatever its profile allows.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/profile.h"
#include "core/time.h"

namespace maitre::policy {

// One instance that could serve the query.
struct AdmissionCandidate {
  // The variant's profile on the instance's worker type; null while it has
  // none (not profiled yet): such an instance cannot be judged and admits.
  const Profile* profile = nullptr;
  int64_t waiting = 0;  // queries sent there from this controller, unanswered
  int replicas = 1;     // from the worker's last report; at least 1 is assumed
  Nanos ready_in = 0;   // a loading instance: until it is expected ready
  Nanos overhead = 0;   // recent round trips beyond the worker's time (mean)
  double slowdown = 1;  // recent compute time ÷ the profile's (mean)
  int max_batch = 0;    // the most rows the instance batches (its report); 0: the profile's
};

// Time from now until `candidate` would answer one more query of `rows`
// rows; nullopt when it has no profile.
std::optional<Nanos> EstimateFinish(const AdmissionCandidate& candidate, int64_t rows = 1);

// MArk's Bouncer (MArk §4.1): whether `candidate` would answer one more
// query of `rows` rows within `time_left`; one without a profile cannot be
// judged and is taken to. The controller's dispatcher and the simulator
// both ask it of the instance their router chose, so the two worlds send
// the same queries to the burst pool.
// `estimate`, if given, is set to the estimate it judged by (at least 1 ns),
// or 0 when there was none, for EstimateTally.
bool AnswersInTime(const AdmissionCandidate& candidate, Nanos time_left, int64_t rows = 1,
                   Nanos* estimate = nullptr);

// How the Bouncer's estimates compare with what happened, the same in both
// worlds: for each query admitted on an estimate, the time it took to be
// answered (or until its deadline, if it was not) over the estimate, in
// fixed buckets. Below 1 the estimate was cautious (a query it would have
// sent to the burst pool at a smaller time left was answered in time);
// above 1 it was optimistic. The controller exports it as a histogram
// (docs/operations.md, "Metrics"), the simulator in summary.json.
//
// Thread-safety: not synchronised.
class EstimateTally {
 public:
  // Upper bounds of the buckets of answer ÷ estimate; the last is open.
  static constexpr double kBounds[] = {0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 4};
  static constexpr int kBuckets = sizeof(kBounds) / sizeof(kBounds[0]) + 1;

  // answer ÷ estimate, the figure each bucket counts.
  static double Ratio(Nanos estimate, Nanos answered_after);

  // `answered_after`: from the estimate to the answer (or to the deadline
  // when none came in time: then `in_time` is false).
  void Add(Nanos estimate, Nanos answered_after, bool in_time);

  int64_t count() const { return count_; }
  int64_t late() const { return late_; }
  double sum() const { return sum_; }
  const int64_t* counts() const { return counts_; }
  // The q-quantile of answer ÷ estimate, linear within its bucket (the
  // open one reports its lower bound); 0 with nothing added.
  double Quantile(double q) const;

 private:
  int64_t counts_[kBuckets] = {};
  int64_t count_ = 0;
  int64_t late_ = 0;
  double sum_ = 0;
};

struct AdmissionVerdict {
  bool admit = true;
  // When refused: the earliest estimated answer among the candidates.
  Nanos best_finish = 0;
};

// Admits when any candidate would answer within `time_left` (the query's
// deadline minus now), when any cannot be estimated, or when there is none
// (nothing is loaded yet: the selection policy decides whether a load can
// serve in time).
AdmissionVerdict Admit(const std::vector<AdmissionCandidate>& candidates, Nanos time_left,
                       int64_t rows = 1);

// The refusal's message: the model, the estimated wait and what the query
// allowed.
std::string RefusalMessage(absl::string_view model, Nanos best_finish, Nanos time_left);

}  // namespace maitre::policy
