// Reading and writing numpy .npz files: a zip archive of .npy arrays, the
// format of validation sets (docs/api.md, "Files") and of `maitre infer`
// inputs.
//
// Only uncompressed ("stored") members are read, as np.savez writes them; a
// deflated member (np.savez_compressed) is refused with a message that says
// how to fix the file. Arrays must be little-endian (or single-byte) and in C
// order. Every size and offset in the file is checked before it is used, so a
// truncated or hostile file yields InvalidArgument, never an out-of-bounds
// read. Zip64 archives (numpy always writes zip64 local headers) are read.
//
// Thread-safety: free functions without shared state; safe to call
// concurrently.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"

namespace maitre {

// Parses a whole .npz file held in memory. Keys and tensor names are the
// member names without ".npy"; members with other suffixes are ignored.
// Supported dtypes: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1.
absl::StatusOr<std::map<std::string, Tensor>> ParseNpz(absl::string_view bytes);

// Parses one .npy array (the contents of one .npz member). `name` becomes
// the tensor's name and appears in error messages.
absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view name);

// Writes an uncompressed .npz that np.load reads; each tensor becomes the
// member "<name>.npy". Tensors should pass Tensor::Validate() and have
// distinct names; one that does not validate is written as a flat uint8 array
// of its bytes, so nothing is lost and nothing crashes.
std::string WriteNpz(const std::vector<Tensor>& arrays);

// Zip64 records are written only where sizes need them (members or archives
// over 4 GiB); force_zip64 writes them always, which tests use to exercise
// the reader's zip64 path without writing gigabytes.
struct NpzWriteOptions {
  bool force_zip64 = false;
};
std::string WriteNpz(const std::vector<Tensor>& arrays, const NpzWriteOptions& options);

// The .npy encoding of one tensor (header + data), as WriteNpz stores it.
std::string WriteNpy(const Tensor& tensor);

}  // namespace maitre
