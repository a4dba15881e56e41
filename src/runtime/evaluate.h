// Top-1 accuracy of an executor on a validation set: the number a variant
// carries (INFaaS measures each variant by running it).
//
// Thread-safety: uses the executor exclusively while it runs; the executor
// must not run anything else meanwhile.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/executor.h"
#include "core/valset.h"

namespace maitre::runtime {

struct Accuracy {
  double top1 = 0;       // fraction correct, 0..1
  int64_t examples = 0;  // rows evaluated
};

// Runs the whole valset through `executor` in batches of `batch_size` (the
// last may be smaller) and scores the argmax of the first output's each row
// (any shape [N, ...]; ties go to the lowest class index) against the
// labels. The executor's single input must accept valset.inputs.
absl::StatusOr<Accuracy> EvaluateTop1(Executor& executor, const Valset& valset, int batch_size);

}  // namespace maitre::runtime
