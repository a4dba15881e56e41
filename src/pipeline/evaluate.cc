#include "pipeline/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace maitre::pipeline {

namespace {

// The scores as doubles, row-major, after checking the tensor.
absl::StatusOr<std::vector<double>> Scores(const Tensor& t, int64_t* rows, int64_t* classes) {
  if (auto s = t.Validate(); !s.ok()) return s;
  if ((t.dtype != DataType::kFp32 && t.dtype != DataType::kFp64) || t.shape.size() != 2 ||
      t.shape[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", t.name, "\": scores must be FP32 or FP64 [batch, classes], not ",
                     DataTypeName(t.dtype), ShapeToString(t.shape)));
  }
  *rows = t.shape[0];
  *classes = t.shape[1];
  std::vector<double> out(static_cast<size_t>(t.NumElements()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.dtype == DataType::kFp32 ? t.As<float>()[i] : t.As<double>()[i];
  }
  for (int64_t r = 0; r < *rows; ++r) {
    for (int64_t c = 0; c < *classes; ++c) {
      if (!std::isfinite(out[r * *classes + c])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"", t.name, "\": row ", r, " holds a non-finite score; no condition can judge it"));
      }
    }
  }
  return out;
}

int64_t Argmax(const double* row, int64_t classes) {
  return std::max_element(row, row + classes) - row;  // the first of equal maxima
}

// exp(x - max) per class and their sum, the numerically safe softmax.
double SoftmaxDenominator(const double* row, int64_t classes, double top) {
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - top);
  return sum;
}

}  // namespace

absl::StatusOr<std::vector<bool>> EvaluatePredicate(const Predicate& predicate,
                                                    const Tensor& scores) {
  int64_t rows = 0, classes = 0;
  absl::StatusOr<std::vector<double>> s = Scores(scores, &rows, &classes);
  if (!s.ok()) return s.status();
  std::vector<bool> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = s->data() + r * classes;
    const int64_t top = Argmax(row, classes);
    if (predicate.kind == Predicate::Kind::kArgmaxIn) {
      out[r] = std::find(predicate.classes.begin(), predicate.classes.end(), top) !=
               predicate.classes.end();
      continue;
    }
    // The top class's probability: exp(0) over the sum.
    const double p = 1 / SoftmaxDenominator(row, classes, row[top]);
    out[r] = predicate.kind == Predicate::Kind::kMaxSoftmaxBelow ? p < predicate.threshold
                                                                 : p >= predicate.threshold;
  }
  return out;
}

absl::StatusOr<Tensor> ApplyTransform(Transform transform, const Tensor& in) {
  if (transform == Transform::kIdentity) return in;
  int64_t rows = 0, classes = 0;
  absl::StatusOr<std::vector<double>> s = Scores(in, &rows, &classes);
  if (!s.ok()) return s.status();
  Tensor out;
  out.name = in.name;
  if (transform == Transform::kArgmax) {
    out.dtype = DataType::kInt64;
    out.shape = {rows};
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) labels[r] = Argmax(s->data() + r * classes, classes);
    out.data.assign(reinterpret_cast<const char*>(labels.data()), labels.size() * 8);
    return out;
  }
  out.dtype = in.dtype;
  out.shape = in.shape;
  out.data.resize(in.data.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = s->data() + r * classes;
    const double top = row[Argmax(row, classes)];
    const double sum = SoftmaxDenominator(row, classes, top);
    for (int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(row[c] - top) / sum;
      if (in.dtype == DataType::kFp32) {
        out.MutableAs<float>()[r * classes + c] = static_cast<float>(p);
      } else {
        out.MutableAs<double>()[r * classes + c] = p;
      }
    }
  }
  return out;
}

}  // namespace maitre::pipeline
