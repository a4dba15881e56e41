// Test helpers for src/runtime: the example zoo (scripts/build-zoo, found
// through MAITRE_ZOO_DIR, which ctest sets) and its 4-class coarse/ zoo,
// scratch directories and running /usr/bin/python3 to make models and files
// at test time.
//
// Thread-safety: not synchronised; for single-threaded test bodies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model_spec.h"
#include "core/valset.h"

namespace maitre::runtime::testing {

struct ZooModel {
  std::string name;
  std::string torchscript;  // absolute paths
  std::string onnx;
  double accuracy = 0;
};

// The subdirectory of the zoo directory holding the "fashion-coarse" task's
// zoo: the same test images, 4 classes.
inline constexpr char kCoarseZoo[] = "coarse";
inline constexpr int64_t kCoarseClasses = 4;

// The zoo directory, or FailedPrecondition saying how to build it.
absl::StatusOr<std::string> ZooDir();
// zoo.json of the zoo in `subdir` of ZooDir() ("": the top-level one), with
// absolute paths; FailedPrecondition when that zoo has not been built.
absl::StatusOr<std::vector<ZooModel>> LoadZoo(const std::string& subdir = "");
// That zoo's valset.npz, parsed once and kept for the process.
absl::StatusOr<const Valset*> ZooValset(const std::string& subdir = "");

// Every zoo model takes FP32 [-1,1,28,28] ("input") and returns FP32
// [-1,classes] ("logits"): 10 in the top-level zoo, kCoarseClasses in coarse/.
ModelSpec FmnistSpec(int64_t classes = 10);

// A fresh empty directory under $TMPDIR (or /tmp), removed with everything
// in it when this object goes away.
class ScopedTempDir {
 public:
  ScopedTempDir();
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `script` with /usr/bin/python3 in `dir`; on failure the status holds
// the script's output.
absl::Status RunPython(const std::string& dir, const std::string& script);

}  // namespace maitre::runtime::testing
