#include "core/zero_row.h"

#include "absl/strings/str_cat.h"

namespace maitre {

absl::StatusOr<std::vector<Tensor>> ZeroRow(const std::vector<TensorSpec>& specs) {
  if (specs.empty()) return absl::InvalidArgumentError("no inputs to make zeros for");
  std::vector<Tensor> row;
  row.reserve(specs.size());
  for (const TensorSpec& spec : specs) {
    Tensor t;
    t.name = spec.name;
    t.dtype = spec.dtype;
    for (int64_t d : spec.shape) t.shape.push_back(d < 0 ? 1 : d);
    if (t.shape.empty()) t.shape.push_back(1);
    const int64_t n = t.NumElements();
    const size_t size = DataTypeSize(t.dtype);
    // Parsed specs are bounded already (kMaxRowElements); this holds for
    // specs built any other way.
    if (size == 0 || n < 0 || n > kMaxRowElements) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", spec.name, "' has no fixed size to fill with zeros"));
    }
    t.data.assign(static_cast<size_t>(n) * size, '\0');
    row.push_back(std::move(t));
  }
  return row;
}

}  // namespace maitre
