// A tensor as it travels through Maitre: a name, an Open Inference Protocol
// datatype, a shape and the raw row-major little-endian bytes. It is a plain
// value with no dependency on any runtime; executors convert at their edge.
//
// Thread-safety: a value type; not synchronised.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace maitre {

// The Open Inference Protocol datatypes. BYTES (variable-length strings) is
// recognised so that it can be refused with a clear message.
enum class DataType : uint8_t {
  kInvalid = 0,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBytes,
};

// "FP32" for kFp32, and so on; "INVALID" for kInvalid.
absl::string_view DataTypeName(DataType type);
// The inverse of DataTypeName; kInvalid for an unknown name.
DataType ParseDataType(absl::string_view name);
// Bytes per element; 0 for kBytes and kInvalid.
size_t DataTypeSize(DataType type);

// Product of the dimensions; -1 if any dimension is negative; 0 for an empty
// dimension. Saturates rather than overflowing on absurd shapes.
int64_t NumElements(const std::vector<int64_t>& shape);
// "[1,28,28]".
std::string ShapeToString(const std::vector<int64_t>& shape);

struct Tensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  std::string data;  // raw bytes, row-major

  int64_t NumElements() const { return maitre::NumElements(shape); }
  // OK when the datatype is a fixed-size one, every dimension is
  // non-negative and the byte count equals elements × element size.
  absl::Status Validate() const;

  template <typename T>
  const T* As() const {
    return reinterpret_cast<const T*>(data.data());
  }
  template <typename T>
  T* MutableAs() {
    return reinterpret_cast<T*>(data.data());
  }
};

}  // namespace maitre
