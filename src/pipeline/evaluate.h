// The spec's conditions and transforms on real tensors (docs/pipelines.md,
// "The spec"), for the serving half: per row of a vertex's output, whether
// a conditional edge is taken, and the tensor a transform hands on.
//
// Scores are [batch, classes] in FP32 or FP64. A row holding NaN or an
// infinity cannot be judged and is an error naming the row, never a silent
// branch.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "pipeline/spec.h"

namespace maitre::pipeline {

// Per row of `scores`, whether `predicate` holds.
absl::StatusOr<std::vector<bool>> EvaluatePredicate(const Predicate& predicate,
                                                    const Tensor& scores);

// `transform` applied to `in`: softmax keeps the dtype and shape, argmax
// gives INT64 [batch]; identity returns `in`.
absl::StatusOr<Tensor> ApplyTransform(Transform transform, const Tensor& in);

}  // namespace maitre::pipeline
