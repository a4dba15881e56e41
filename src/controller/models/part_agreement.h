// Whether a model's two uploaded parts are the same model (docs/api.md,
// "Registering a model"): a TorchScript file and its ONNX companion are run
// on the same rows, and registration is refused when they disagree. Without
// this an unrelated ONNX file would serve as a "variant" of the model, with
// its own accuracy but the model's name.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "core/valset.h"
#include "core/variant.h"

namespace maitre::controller {

struct AgreementOptions {
  // Rows both parts run on: the first of the validation set, or synthetic.
  int max_rows = 64;
  // ...and fewer when they would be larger than this (a row may have up to
  // 2^26 elements; docs/api.md): the sample is held on the controller and
  // sent to the worker twice. At least one row is always used.
  int64_t max_sample_bytes = int64_t{64} << 20;
  // Both parts are uploaded in fp32 (int8 and fp16 are generated variants,
  // never uploaded), so an export of the same weights differs only by the
  // order of float operations: the zoo's pairs differ by at most ~1e-5 on
  // logits of magnitude ~10. A different model differs by whole units. An
  // element agrees when |a - b| <= abs_tolerance + rel_tolerance * |a|,
  // which leaves two orders of magnitude of room for other kernels.
  double abs_tolerance = 1e-3;
  double rel_tolerance = 1e-3;
  // Near-ties may flip the top class between kernels on a row or two; more
  // than this share of rows with another top-1 class is another model.
  double max_top1_disagreement = 0.05;
};

// The rows both parts run on.
struct AgreementSample {
  std::vector<Tensor> inputs;  // one per spec input, in spec order
  int64_t rows = 0;
  std::string rows_are;  // "validation rows" or "synthetic rows", for messages
};

// The first `max_rows` rows of `valset` when it is given (the model then
// has one input), else `max_rows` deterministic pseudo-random rows (both
// fewer when over max_sample_bytes) of the
// declared shape (values in [0, 1) for floats, 0..9 otherwise), the same on
// every call. FailedPrecondition when there is no valset and an input has
// an unknown size besides the batch dimension: there is nothing to
// synthesise, and the check is skipped (the caller says so in its log).
absl::StatusOr<AgreementSample> MakeAgreementSample(const ModelSpec& spec, const Valset* valset,
                                                    const AgreementOptions& options);

// The largest element difference when `onnx` agrees with `torch` (the
// outputs of `sample`'s rows, in spec order); otherwise InvalidArgument
// naming how many rows disagree, the largest difference and its output.
absl::StatusOr<double> CheckPartsAgree(const ModelSpec& spec, const AgreementSample& sample,
                                       const std::vector<Tensor>& torch,
                                       const std::vector<Tensor>& onnx,
                                       const AgreementOptions& options);

}  // namespace maitre::controller
