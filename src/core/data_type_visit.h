// VisitDataType: the one switch from a DataType to the C++ type of its
// elements, for the code that reads or writes a tensor's values one by one
// (the JSON and gRPC codecs). Each of them used to spell the switch out;
// now a new datatype is taught here once. Kept out of tensor.h so that the
// many users of Tensor do not compile the template.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <utility>

#include "core/tensor.h"

namespace maitre {

// Names a C++ element type without making a value of it.
template <typename T>
struct TypeTag {
  using type = T;
};

// Calls `f(TypeTag<T>{})` for the type T of `type`'s elements, or
// `otherwise()` for the types with no C++ arithmetic type (FP16, BYTES,
// INVALID), and returns what it returns; every call must return the same
// type.
//
// BOOL is passed as T = bool, but a tensor stores it as one byte that may
// hold any non-zero value, so a reader takes the byte (uint8_t) and tests
// it against 0 rather than reading a bool.
template <typename F, typename Otherwise>
decltype(auto) VisitDataType(DataType type, F&& f, Otherwise&& otherwise) {
  switch (type) {
    case DataType::kBool:
      return std::forward<F>(f)(TypeTag<bool>{});
    case DataType::kUint8:
      return std::forward<F>(f)(TypeTag<uint8_t>{});
    case DataType::kUint16:
      return std::forward<F>(f)(TypeTag<uint16_t>{});
    case DataType::kUint32:
      return std::forward<F>(f)(TypeTag<uint32_t>{});
    case DataType::kUint64:
      return std::forward<F>(f)(TypeTag<uint64_t>{});
    case DataType::kInt8:
      return std::forward<F>(f)(TypeTag<int8_t>{});
    case DataType::kInt16:
      return std::forward<F>(f)(TypeTag<int16_t>{});
    case DataType::kInt32:
      return std::forward<F>(f)(TypeTag<int32_t>{});
    case DataType::kInt64:
      return std::forward<F>(f)(TypeTag<int64_t>{});
    case DataType::kFp32:
      return std::forward<F>(f)(TypeTag<float>{});
    case DataType::kFp64:
      return std::forward<F>(f)(TypeTag<double>{});
    default:  // kFp16, kBytes, kInvalid
      return std::forward<Otherwise>(otherwise)();
  }
}

}  // namespace maitre
