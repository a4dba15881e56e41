#include "controller/models/part_agreement.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace maitre::controller {
namespace {

double HalfToDouble(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double value;
  if (exponent == 0) {
    value = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    value = mantissa == 0 ? INFINITY : NAN;
  } else {
    value = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return (h & 0x8000) ? -value : value;
}

// Element `i` of `t` as a double, whatever its numeric dtype.
double ValueAt(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DataType::kBool: return t.As<uint8_t>()[i] != 0;
    case DataType::kUint8: return t.As<uint8_t>()[i];
    case DataType::kUint16: return t.As<uint16_t>()[i];
    case DataType::kUint32: return t.As<uint32_t>()[i];
    case DataType::kUint64: return static_cast<double>(t.As<uint64_t>()[i]);
    case DataType::kInt8: return t.As<int8_t>()[i];
    case DataType::kInt16: return t.As<int16_t>()[i];
    case DataType::kInt32: return t.As<int32_t>()[i];
    case DataType::kInt64: return static_cast<double>(t.As<int64_t>()[i]);
    case DataType::kFp16: return HalfToDouble(t.As<uint16_t>()[i]);
    case DataType::kFp32: return t.As<float>()[i];
    case DataType::kFp64: return t.As<double>()[i];
    default: return NAN;
  }
}

// SplitMix64: a fixed, portable sequence, so a synthetic sample is the same
// on every controller and every run.
uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

absl::StatusOr<Tensor> SyntheticInput(const TensorSpec& spec, int64_t rows, uint64_t& state) {
  Tensor t;
  t.name = spec.name;
  t.dtype = spec.dtype;
  t.shape = spec.shape;
  if (t.shape.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("input '", spec.name, "' has no batch dimension"));
  }
  t.shape[0] = rows;
  for (size_t d = 1; d < t.shape.size(); ++d) {
    if (t.shape[d] < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "input '", spec.name, "' has a dimension of unknown size besides the batch"));
    }
  }
  const size_t width = DataTypeSize(spec.dtype);
  if (width == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("input '", spec.name, "' is not numeric"));
  }
  const int64_t n = t.NumElements();
  t.data.resize(static_cast<size_t>(n) * width);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = NextRandom(state);
    const double unit = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    char* at = t.data.data() + i * width;
    switch (spec.dtype) {
      case DataType::kFp32: { float v = static_cast<float>(unit); std::memcpy(at, &v, 4); break; }
      case DataType::kFp64: std::memcpy(at, &unit, 8); break;
      case DataType::kFp16: {
        // [0, 1) in steps of 1/1024: exact in half precision.
        const int k = static_cast<int>(r % 1024);
        uint16_t h = 0;
        if (k > 0) {
          int e = 0;
          const double m = std::frexp(k / 1024.0, &e);  // k/1024 = m * 2^e, m in [0.5, 1)
          h = static_cast<uint16_t>(((e - 1 + 15) << 10) |
                                    (static_cast<int>((m * 2 - 1) * 1024) & 0x3ff));
        }
        std::memcpy(at, &h, 2);
        break;
      }
      default: {
        // Small non-negative integers: valid for indices and for bools.
        const uint64_t v = spec.dtype == DataType::kBool ? r % 2 : r % 10;
        std::memcpy(at, &v, width);  // little-endian: the low bytes
        break;
      }
    }
  }
  return t;
}

// The top class of each row of the first output, or empty when it is not
// scores with one row per example and several classes.
std::vector<int64_t> Top1(const Tensor& scores, int64_t rows) {
  if (rows < 1 || scores.shape.empty() || scores.shape[0] != rows) return {};
  const int64_t classes = scores.NumElements() / rows;
  if (classes < 2) return {};
  std::vector<int64_t> top(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (ValueAt(scores, r * classes + c) > ValueAt(scores, r * classes + best)) best = c;
    }
    top[r] = best;
  }
  return top;
}

// How many rows of `row_bytes` each the options allow.
int64_t RowsWithin(const AgreementOptions& options, int64_t row_bytes) {
  const int64_t fit = options.max_sample_bytes / std::max<int64_t>(1, row_bytes);
  return std::max<int64_t>(1, std::min<int64_t>(options.max_rows, fit));
}

}  // namespace

absl::StatusOr<AgreementSample> MakeAgreementSample(const ModelSpec& spec, const Valset* valset,
                                                    const AgreementOptions& options) {
  AgreementSample sample;
  if (valset != nullptr && valset->size() > 0) {
    const int64_t row_bytes = static_cast<int64_t>(valset->inputs.data.size()) / valset->size();
    sample.rows = std::min<int64_t>(valset->size(), RowsWithin(options, row_bytes));
    MAITRE_ASSIGN_OR_RETURN(Tensor rows, SliceRows(valset->inputs, 0, sample.rows));
    if (!spec.inputs.empty()) rows.name = spec.inputs[0].name;
    sample.inputs.push_back(std::move(rows));
    sample.rows_are = "validation rows";
    return sample;
  }
  int64_t row_bytes = 0;
  for (const TensorSpec& input : spec.inputs) {
    std::vector<int64_t> row = input.shape;
    if (!row.empty()) row[0] = 1;
    const int64_t elements = NumElements(row);
    // An unknown size is refused below, with its reason.
    if (elements > 0) row_bytes += elements * static_cast<int64_t>(DataTypeSize(input.dtype));
  }
  sample.rows = RowsWithin(options, row_bytes);
  sample.rows_are = "synthetic rows";
  uint64_t state = 0x6d61697472650000ULL;  // any fixed seed
  for (const TensorSpec& input : spec.inputs) {
    MAITRE_ASSIGN_OR_RETURN(Tensor t, SyntheticInput(input, sample.rows, state));
    sample.inputs.push_back(std::move(t));
  }
  return sample;
}

absl::StatusOr<double> CheckPartsAgree(const ModelSpec& spec, const AgreementSample& sample,
                                       const std::vector<Tensor>& torch,
                                       const std::vector<Tensor>& onnx,
                                       const AgreementOptions& options) {
  const int64_t rows = sample.rows;
  auto refuse = [&](const std::string& why) -> absl::Status {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ONNX part disagrees with the TorchScript part", why,
        "; they must be the same model"));
  };
  if (torch.size() != onnx.size()) {
    return refuse(absl::StrCat(": it has ", onnx.size(), " output(s), the TorchScript part ",
                               torch.size()));
  }
  std::vector<bool> row_differs(rows, false);
  double max_delta = 0;
  std::string max_output;
  for (size_t o = 0; o < torch.size(); ++o) {
    const Tensor& a = torch[o];
    const Tensor& b = onnx[o];
    const std::string name = o < spec.outputs.size() ? spec.outputs[o].name : a.name;
    if (a.shape != b.shape) {
      return refuse(absl::StrCat(": its output '", name, "' is ", ShapeToString(b.shape),
                                 ", the TorchScript part's ", ShapeToString(a.shape)));
    }
    const int64_t n = a.NumElements();
    const int64_t per_row = rows > 0 && n % rows == 0 ? n / rows : n;
    for (int64_t i = 0; i < n; ++i) {
      const double x = ValueAt(a, i), y = ValueAt(b, i);
      double delta = std::fabs(x - y);
      if (std::isnan(x) != std::isnan(y)) delta = INFINITY;
      if (std::isnan(x) && std::isnan(y)) delta = 0;
      if (delta > max_delta) {
        max_delta = delta;
        max_output = name;
      }
      if (delta > options.abs_tolerance + options.rel_tolerance * std::fabs(x)) {
        row_differs[std::min<int64_t>(rows - 1, i / std::max<int64_t>(1, per_row))] = true;
      }
    }
  }
  int64_t differing = std::count(row_differs.begin(), row_differs.end(), true);
  int64_t top1_differing = 0;
  if (!torch.empty()) {
    std::vector<int64_t> ta = Top1(torch[0], rows), tb = Top1(onnx[0], rows);
    for (size_t r = 0; r < ta.size() && r < tb.size(); ++r) top1_differing += ta[r] != tb[r];
  }
  const double allowed = options.max_top1_disagreement * static_cast<double>(rows);
  if (static_cast<double>(differing) <= allowed && static_cast<double>(top1_differing) <= allowed) {
    return max_delta;
  }
  std::string why = absl::StrFormat(" on %d of %d %s (max |Δ| %.3g on output '%s'", differing,
                                    rows, sample.rows_are, max_delta, max_output);
  if (top1_differing > 0) {
    absl::StrAppend(&why, absl::StrFormat("; the top-1 class differs on %d", top1_differing));
  }
  absl::StrAppend(&why, ")");
  return refuse(why);
}

}  // namespace maitre::controller
