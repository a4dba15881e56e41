// How many rows of a pipeline's queries each of its stages ran on, counted
// from the answers the front-ends send (docs/pipelines.md, "Measured branch
// probabilities"): the scale factor s_m of a stage is its rows over the
// pipeline's, and a conditional edge's probability the rows of its target
// over those of its source, measured on served traffic rather than taken
// from the plan.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "controller/pipelines/pipeline_run.h"

namespace maitre::controller {

class StageRows {
 public:
  struct Counts {
    int64_t rows = 0;                       // of every query answered
    std::map<std::string, int64_t> stages;  // by vertex, rows it ran on
  };

  // One answered query: its rows, and each stage that ran with its rows.
  void Record(const PipelineAnswer& answer) {
    absl::MutexLock lock(&mu_);
    counts_.rows += answer.response.timings.batch_size;
    for (const StageRun& s : answer.stages) counts_.stages[s.vertex] += s.rows;
  }

  Counts Get() const {
    absl::MutexLock lock(&mu_);
    return counts_;
  }

 private:
  mutable absl::Mutex mu_;
  Counts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
