#include "core/tensor.h"

#include <array>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace maitre {
namespace {

struct TypeInfo {
  DataType type;
  absl::string_view name;
  size_t size;
};

constexpr std::array<TypeInfo, 14> kTypes = {{
    {DataType::kInvalid, "INVALID", 0},
    {DataType::kBool, "BOOL", 1},
    {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2},
    {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
    {DataType::kBytes, "BYTES", 0},
}};

}  // namespace

absl::string_view DataTypeName(DataType type) {
  return kTypes[static_cast<size_t>(type)].name;
}

DataType ParseDataType(absl::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (info.type != DataType::kInvalid && info.name == name) return info.type;
  }
  return DataType::kInvalid;
}

size_t DataTypeSize(DataType type) { return kTypes[static_cast<size_t>(type)].size; }

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return std::numeric_limits<int64_t>::max();
    }
    n *= d;
  }
  return n;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::Status Tensor::Validate() const {
  size_t elem = DataTypeSize(dtype);
  if (elem == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "': datatype ", DataTypeName(dtype), " is not supported"));
  }
  int64_t n = NumElements();
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "': shape ", ShapeToString(shape), " has a negative dimension"));
  }
  if (n > static_cast<int64_t>(std::numeric_limits<int64_t>::max() / elem) ||
      static_cast<int64_t>(data.size()) != n * static_cast<int64_t>(elem)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "': shape ", ShapeToString(shape), " of ", DataTypeName(dtype),
        " needs ", n, " elements but ", data.size() / elem, " were sent"));
  }
  return absl::OkStatus();
}

}  // namespace maitre
