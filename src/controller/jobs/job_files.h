// The files of an offline job: finding and reading its input .npz files,
// and writing its results. Results are written chunk by chunk into a staging
// directory inside the output directory, each chunk atomically (a temporary
// file, fsync, rename), so progress can be recorded as soon as a chunk is
// durable; when an input file's last chunk is in, its chunks are joined into
// one result file named after the input and the staging files removed.
//
// An input file is an uncompressed .npz (np.savez) holding `inputs` with a
// leading row dimension, as a validation set does (docs/api.md, "Files"), and
// optionally `labels` (int64, one per row). A model with several inputs
// takes arrays named after them instead. A result file holds every output
// of the model (e.g. `logits`), `predictions` (int64 argmax of the first
// output per row, when that output is floating point) and, when the input
// was labelled, a copy of `labels`.
//
// Thread-safety: free functions without shared state; concurrent calls on
// different paths are safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model_spec.h"
#include "core/tensor.h"

namespace maitre::jobs {

// `path` as a path beneath `root`, the jobs directory: a relative path is
// taken from `root`, and symbolic links are followed before the check, so
// nothing outside `root` can be named. PermissionDenied naming `what` (the
// job's "input" or "output") when it lies outside.
absl::StatusOr<std::string> ResolveUnder(const std::string& root, const std::string& path,
                                         const std::string& what);

// `input` is a .npz file or a directory; a directory contributes its .npz
// files (not recursively), sorted by name. InvalidArgument, naming the path,
// when it does not exist, is neither, or holds no .npz file.
absl::StatusOr<std::vector<std::string>> ListInputFiles(const std::string& input);

struct InputFile {
  std::vector<Tensor> inputs;    // what each query sends, rows sliced
  std::optional<Tensor> labels;  // INT64 [rows]
  int64_t rows = 0;
};

// Reads and checks one input file: at least one row, every input array with
// the same number of rows and only finite values (core/finite.h), labels (if
// any) INT64 with one per row. An `inputs` array is returned unnamed: it is
// the only input of whichever model runs it (ModelSpec::CheckInputs).
// InvalidArgument, naming the file, for anything else.
absl::StatusOr<InputFile> ReadInputFile(const std::string& path);

// OK when `file`'s inputs fit `spec` (dtype and every fixed dimension).
absl::Status CheckInputsFit(const InputFile& file, const ModelSpec& spec);

// Creates `dir` if needed and proves it can be written (a probe file is
// written and removed). InvalidArgument saying why, when not.
absl::Status CheckWritableDirectory(const std::string& dir);

// Where the result of `input_path` goes: <output_dir>/<input file name>.
std::string ResultPath(const std::string& output_dir, const std::string& input_path);
// The staging directory of job `id` inside `output_dir`.
std::string StagingDir(const std::string& output_dir, const std::string& id);
// The staging file of the chunk starting at row `begin` of input file `file`.
std::string ChunkPath(const std::string& staging_dir, int file, int64_t begin);

// One chunk's results, ready to be written.
struct ChunkResult {
  std::vector<Tensor> arrays;  // the outputs, then predictions and labels when known
  int64_t correct = 0;         // predictions equal to the labels
};

// Checks that every output has `rows` rows, and adds predictions (and the
// labels, scoring them) when the first output is floating point. `labels`
// are this chunk's rows, or null.
absl::StatusOr<ChunkResult> SummariseChunk(std::vector<Tensor> outputs, int64_t rows,
                                           const Tensor* labels);

// Writes one chunk's arrays atomically and durably.
absl::Status WriteChunk(const std::string& path, const std::vector<Tensor>& arrays);

// Joins the chunks of one input file (`chunk_paths` in row order) into
// `result_path`, atomically, then removes the chunk files. Internal when a
// chunk is missing or the chunks disagree on their arrays (different
// models served them).
absl::Status AssembleResult(const std::vector<std::string>& chunk_paths,
                            const std::string& result_path);

}  // namespace maitre::jobs
