// Whether a tensor's floating-point values are all finite. Models answer
// nothing meaningful for a row holding NaN or an infinity, and before each
// int8 row had its own scale one such row changed or failed every query
// batched with it (docs/architecture.md, "A row's answer never depends on
// its batch"), so the front-ends and the job checks refuse them with 400.
//
// Thread-safety: a free function without shared state.
#pragma once

#include "absl/status/status.h"
#include "core/tensor.h"

namespace maitre {

// OK unless a floating-point tensor (FP16, FP32, FP64) holds NaN or an
// infinity; other datatypes are always OK. The InvalidArgument message names
// the first such element, its row and what it is ("element 5 of row 1 is
// NaN; inputs must be finite numbers"); callers say which tensor. Reads no
// further than `t.data` holds.
absl::Status CheckFinite(const Tensor& t);

}  // namespace maitre
