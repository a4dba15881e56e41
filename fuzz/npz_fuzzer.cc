// Fuzz target: numpy files (src/core/npz.h), as `maitre infer`, validation
// set uploads and offline jobs read them. The input goes to ParseNpz as a
// whole .npz archive and to ParseNpy as one .npy array: an archive's members
// must pass a CRC check before their .npy header is read, which mutations
// of an archive seldom keep intact, so the .npy reader gets bytes directly.
//
// Whatever parses must be valid tensors that WriteNpz / WriteNpy write back
// to bytes parsing to the same tensors, with and without zip64 records.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/npz.h"
#include "fuzz/fuzz_check.h"

namespace {

using maitre::Tensor;

void CheckSame(const Tensor& a, const Tensor& b, const char* how) {
  FUZZ_CHECK(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.data == b.data,
             "%s: array '%s' %s read back as '%s' %s", how, a.name.c_str(),
             maitre::ShapeToString(a.shape).c_str(), b.name.c_str(),
             maitre::ShapeToString(b.shape).c_str());
}

void CheckArchive(const std::map<std::string, Tensor>& arrays) {
  std::vector<Tensor> tensors;
  for (const auto& [key, t] : arrays) {
    absl::Status valid = t.Validate();
    FUZZ_CHECK(valid.ok(), "array '%s' is not a valid tensor: %s", key.c_str(),
               valid.ToString().c_str());
    FUZZ_CHECK(key == t.name, "key '%s' holds array '%s'", key.c_str(), t.name.c_str());
    tensors.push_back(t);
  }
  for (bool zip64 : {false, true}) {
    maitre::NpzWriteOptions options;
    options.force_zip64 = zip64;
    std::string bytes = maitre::WriteNpz(tensors, options);
    absl::StatusOr<std::map<std::string, Tensor>> again = maitre::ParseNpz(bytes);
    FUZZ_CHECK(again.ok(), "a written .npz (zip64 %d) does not parse: %s", zip64,
               again.status().ToString().c_str());
    FUZZ_CHECK(again->size() == arrays.size(), "%zu arrays read back as %zu", arrays.size(),
               again->size());
    for (const auto& [key, t] : arrays) {
      auto it = again->find(key);
      FUZZ_CHECK(it != again->end(), "array '%s' is missing after a round trip", key.c_str());
      CheckSame(t, it->second, "npz round trip");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<std::map<std::string, Tensor>> arrays = maitre::ParseNpz(bytes);
  if (arrays.ok()) {
    CheckArchive(*arrays);
  } else {
    maitre::fuzz::CheckClientError(arrays.status());
  }

  absl::StatusOr<Tensor> array = maitre::ParseNpy(bytes, "x");
  if (array.ok()) {
    absl::Status valid = array->Validate();
    FUZZ_CHECK(valid.ok(), "the array is not a valid tensor: %s", valid.ToString().c_str());
    absl::StatusOr<Tensor> again = maitre::ParseNpy(maitre::WriteNpy(*array), "x");
    FUZZ_CHECK(again.ok(), "a written .npy does not parse: %s", again.status().ToString().c_str());
    CheckSame(*array, *again, "npy round trip");
  } else {
    maitre::fuzz::CheckClientError(array.status());
  }
  return 0;
}
