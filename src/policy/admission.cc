#include "policy/admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace maitre::policy {

std::optional<Nanos> EstimateFinish(const AdmissionCandidate& candidate, int64_t rows) {
  if (candidate.profile == nullptr || candidate.profile->empty()) return std::nullopt;
  const int replicas = std::max(1, candidate.replicas);
  rows = std::max<int64_t>(1, rows);
  // The queries ahead are taken to be the size of this one: the load is
  // what this query sees, and one-row and eight-row queries drain at very
  // different speeds.
  const int64_t ahead = std::max<int64_t>(0, candidate.waiting - replicas + 1) * rows;
  // A query wider than the cap runs alone as one batch (and so, taken to be
  // its size, does each query ahead).
  const int64_t cap = std::max<int64_t>(candidate.profile->BatchCap(candidate.max_batch), rows);
  const int batch = static_cast<int>(std::clamp<int64_t>(std::max(ahead, rows), 1, cap));
  const double queued_ms = candidate.profile->AnswerBehindMs(ahead, batch, replicas);
  // No reply is coming to an idle instance to bring stale figures up to
  // date: the first query after a flood is judged by the profile alone.
  const bool busy = candidate.waiting > 0;
  const Nanos overhead = busy ? std::max<Nanos>(0, candidate.overhead) : 0;
  const double slowdown = busy ? std::max(1.0, candidate.slowdown) : 1.0;
  return std::max<Nanos>(0, candidate.ready_in) + FromMillis(slowdown * queued_ms) +
         overhead;
}

bool AnswersInTime(const AdmissionCandidate& candidate, Nanos time_left, int64_t rows,
                   Nanos* estimate) {
  const std::optional<Nanos> finish = EstimateFinish(candidate, rows);
  if (estimate != nullptr) *estimate = finish.has_value() ? std::max<Nanos>(1, *finish) : 0;
  return !finish.has_value() || *finish <= time_left;
}

AdmissionVerdict Admit(const std::vector<AdmissionCandidate>& candidates, Nanos time_left,
                       int64_t rows) {
  AdmissionVerdict verdict;
  if (candidates.empty()) return verdict;
  bool first = true;
  for (const AdmissionCandidate& c : candidates) {
    std::optional<Nanos> finish = EstimateFinish(c, rows);
    if (!finish.has_value() || *finish <= time_left) return verdict;
    if (first || *finish < verdict.best_finish) verdict.best_finish = *finish;
    first = false;
  }
  verdict.admit = false;
  return verdict;
}

double EstimateTally::Ratio(Nanos estimate, Nanos answered_after) {
  return static_cast<double>(std::max<Nanos>(0, answered_after)) /
         static_cast<double>(std::max<Nanos>(1, estimate));
}

void EstimateTally::Add(Nanos estimate, Nanos answered_after, bool in_time) {
  const double ratio = Ratio(estimate, answered_after);
  int bucket = 0;
  while (bucket < kBuckets - 1 && ratio > kBounds[bucket]) ++bucket;
  ++counts_[bucket];
  ++count_;
  late_ += in_time ? 0 : 1;
  sum_ += ratio;
}

double EstimateTally::Quantile(double q) const {
  if (count_ == 0) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(count_);
  double below = 0;
  for (int b = 0; b < kBuckets; ++b) {
    const double lower = b == 0 ? 0 : kBounds[b - 1];
    if (b == kBuckets - 1) return lower;
    if (below + static_cast<double>(counts_[b]) >= rank) {
      const double within = counts_[b] > 0 ? (rank - below) / static_cast<double>(counts_[b]) : 0;
      return lower + within * (kBounds[b] - lower);
    }
    below += static_cast<double>(counts_[b]);
  }
  return kBounds[kBuckets - 2];
}

std::string RefusalMessage(absl::string_view model, Nanos best_finish, Nanos time_left) {
  return absl::StrCat("model '", model, "' is overloaded: the earliest estimated answer is in ",
                      best_finish / kMillisecond, " ms, but the query allows ",
                      std::max<Nanos>(0, time_left) / kMillisecond,
                      " ms; retry later, or with a longer latency_ms");
}

}  // namespace maitre::policy
