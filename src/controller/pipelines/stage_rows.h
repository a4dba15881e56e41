// How many rows of a pipeline's queries each of its stages ran on, counted
// from the answers the front-ends send (docs/pipelines.md, "Measured branch
// probabilities"): the scale factor s_m of a stage is its rows over the
// pipeline's, and a conditional edge's probability the rows of its target
// over those of its source, measured on served traffic rather than taken
// from the plan. Also the serving path around each stage that the
// estimator adds (docs/pipelines.md, "The estimator"), measured the same
// way: per answered query, its total time less its stages' queue and
// compute times, over the stages it ran (exact for a chain of stages; for
// stages that ran at once it understates); the median of the last
// `kOverheadWindow` queries once `kOverheadMinQueries` were answered.
//
// Thread-safety: thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "controller/pipelines/pipeline_run.h"

namespace maitre::controller {

class StageRows {
 public:
  static constexpr size_t kOverheadWindow = 1000;
  static constexpr size_t kOverheadMinQueries = 40;

  struct Counts {
    int64_t rows = 0;                       // of every query answered
    std::map<std::string, int64_t> stages;  // by vertex, rows it ran on
    // The median serving path per stage (above); unset until enough
    // queries were answered.
    std::optional<double> stage_overhead_ms;
    int64_t overhead_queries = 0;  // the queries it is the median of
  };

  // One answered query: its rows, each stage that ran with its rows, and
  // the time spent around its stages.
  void Record(const PipelineAnswer& answer) {
    int64_t inside_us = 0;
    for (const StageRun& s : answer.stages) inside_us += s.queue_us + s.compute_us;
    const double overhead_us =
        answer.stages.empty()
            ? 0
            : std::max<double>(0, answer.response.timings.total_us - inside_us) /
                  static_cast<double>(answer.stages.size());
    absl::MutexLock lock(&mu_);
    counts_.rows += answer.response.timings.batch_size;
    for (const StageRun& s : answer.stages) counts_.stages[s.vertex] += s.rows;
    if (answer.stages.empty()) return;
    if (overhead_us_.size() < kOverheadWindow) {
      overhead_us_.push_back(overhead_us);
    } else {
      overhead_us_[next_overhead_] = overhead_us;
    }
    next_overhead_ = (next_overhead_ + 1) % kOverheadWindow;
  }

  Counts Get() const {
    absl::MutexLock lock(&mu_);
    Counts counts = counts_;
    if (overhead_us_.size() >= kOverheadMinQueries) {
      std::vector<double> sorted = overhead_us_;
      auto middle = sorted.begin() + sorted.size() / 2;
      std::nth_element(sorted.begin(), middle, sorted.end());
      counts.stage_overhead_ms = *middle / 1000;
      counts.overhead_queries = static_cast<int64_t>(sorted.size());
    }
    return counts;
  }

 private:
  mutable absl::Mutex mu_;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  std::vector<double> overhead_us_ ABSL_GUARDED_BY(mu_);  // a ring, the latest queries'
  size_t next_overhead_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace maitre::controller
