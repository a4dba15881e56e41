#include "controller/jobs/job_files.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/file_util.h"
#include "core/finite.h"
#include "core/status_macros.h"
#include "core/batch.h"
#include "core/npz.h"

namespace maitre::jobs {
namespace {

namespace fs = std::filesystem;

constexpr char kPredictions[] = "predictions";
constexpr char kLabels[] = "labels";

bool IsNpz(const fs::path& p) { return absl::EndsWith(p.filename().string(), ".npz"); }

// Index of the largest of `n` values (the first on ties, as EvaluateTop1).
template <typename T>
int64_t ArgMax(const T* values, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListInputFiles(const std::string& input) {
  std::error_code ec;
  fs::file_status status = fs::status(input, ec);
  if (ec || !fs::exists(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the input ", input, " does not exist on the controller's filesystem"));
  }
  if (fs::is_regular_file(status)) {
    if (!IsNpz(input)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the input ", input, " is not a .npz file (or a directory of them)"));
    }
    return std::vector<std::string>{input};
  }
  if (!fs::is_directory(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the input ", input, " is neither a .npz file nor a directory"));
  }
  std::vector<std::string> files;
  for (fs::directory_iterator it(input, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && IsNpz(it->path())) files.push_back(it->path().string());
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot list the input directory ", input, ": ", ec.message()));
  }
  if (files.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the input directory ", input, " holds no .npz files"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<InputFile> ReadInputFile(const std::string& path) {
  auto bytes = ReadFileToString(path);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the input ", path, ": ", bytes.status().message()));
  }
  auto arrays = ParseNpz(*bytes);
  if (!arrays.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the input ", path, " is not a usable .npz: ", arrays.status().message()));
  }
  InputFile file;
  auto take = [&file](Tensor t) { file.inputs.push_back(std::move(t)); };
  if (auto it = arrays->find("inputs"); it != arrays->end()) {
    // Unnamed: the model's only input, whatever the model calls it
    // (ModelSpec::CheckInputs).
    it->second.name.clear();
    take(std::move(it->second));
  } else {
    for (auto& [name, tensor] : *arrays) {
      if (name != kLabels) take(std::move(tensor));
    }
  }
  if (file.inputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the input ", path,
                     " has no arrays to send; save the rows as \"inputs\" "
                     "(np.savez(f, inputs=x, labels=y))"));
  }
  for (const Tensor& t : file.inputs) {
    const std::string shown = t.name.empty() ? "inputs" : t.name;
    if (t.shape.empty() || t.shape[0] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "array \"", shown, "\" of ", path, " needs a leading row dimension with rows in it"));
    }
    if (absl::Status finite = CheckFinite(t); !finite.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("array \"", shown, "\" of ", path, ": ", finite.message()));
    }
    if (t.shape[0] != file.inputs[0].shape[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat("the arrays of ", path, " have different numbers of rows"));
    }
  }
  file.rows = file.inputs[0].shape[0];
  if (auto it = arrays->find(kLabels); it != arrays->end()) {
    const Tensor& labels = it->second;
    if (labels.dtype != DataType::kInt64 || labels.shape.size() != 1 ||
        labels.shape[0] != file.rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"labels\" in ", path, " must be int64 with one label per row (", file.rows,
                       "); it is ", DataTypeName(labels.dtype), " ", ShapeToString(labels.shape)));
    }
    file.labels = labels;
  }
  return file;
}

absl::Status CheckInputsFit(const InputFile& file, const ModelSpec& spec) {
  return spec.CheckInputs(file.inputs).status();
}

absl::Status CheckWritableDirectory(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the output ", dir, " exists and is not a directory"));
  }
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the output directory ", dir, ": ", ec.message()));
  }
  std::string probe = absl::StrCat(dir, "/.maitre-write-probe-", getpid());
  if (absl::Status s = WriteFileAtomically(probe, "probe"); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the output directory ", dir, " is not writable: ", s.message()));
  }
  fs::remove(probe, ec);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveUnder(const std::string& root, const std::string& path,
                                         const std::string& what) {
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the job's \"", what, "\" is empty"));
  }
  std::error_code error;
  const fs::path base = fs::weakly_canonical(root, error);
  if (error) {
    return absl::InternalError(absl::StrCat("the jobs directory cannot be resolved: ",
                                            error.message()));
  }
  const fs::path resolved = fs::weakly_canonical(base / path, error);
  const fs::path inside = resolved.lexically_relative(base);
  if (error || inside.empty() || *inside.begin() == "..") {
    return absl::PermissionDeniedError(absl::StrCat(
        "the job's \"", what, "\" must lie in the jobs directory (maitre serve --jobs-dir), "
        "given as a path relative to it or beneath it; \"", path, "\" does not"));
  }
  return resolved.string();
}

std::string ResultPath(const std::string& output_dir, const std::string& input_path) {
  return (fs::path(output_dir) / fs::path(input_path).filename()).string();
}

std::string StagingDir(const std::string& output_dir, const std::string& id) {
  return (fs::path(output_dir) / absl::StrCat(".maitre-", id)).string();
}

std::string ChunkPath(const std::string& staging_dir, int file, int64_t begin) {
  return absl::StrFormat("%s/file%04d-row%010d.npz", staging_dir, file, begin);
}

absl::StatusOr<ChunkResult> SummariseChunk(std::vector<Tensor> outputs, int64_t rows,
                                           const Tensor* labels) {
  if (outputs.empty()) return absl::InternalError("the model returned no outputs");
  for (const Tensor& t : outputs) {
    MAITRE_RETURN_IF_ERROR(t.Validate());
    if (t.shape.empty() || t.shape[0] != rows) {
      return absl::InternalError(absl::StrCat("output \"", t.name, "\" has shape ",
                                              ShapeToString(t.shape), " for ", rows, " rows"));
    }
  }
  ChunkResult result;
  const Tensor& first = outputs[0];
  bool scored = first.dtype == DataType::kFp32 || first.dtype == DataType::kFp64;
  for (const Tensor& t : outputs) scored &= t.name != kPredictions && t.name != kLabels;
  if (scored) {
    Tensor predictions{kPredictions, DataType::kInt64, {rows}, {}};
    predictions.data.resize(static_cast<size_t>(rows) * sizeof(int64_t));
    int64_t per_row = rows == 0 ? 0 : first.NumElements() / rows;
    int64_t* out = predictions.MutableAs<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      out[r] = first.dtype == DataType::kFp32 ? ArgMax(first.As<float>() + r * per_row, per_row)
                                              : ArgMax(first.As<double>() + r * per_row, per_row);
      if (labels != nullptr) result.correct += out[r] == labels->As<int64_t>()[r] ? 1 : 0;
    }
    result.arrays = std::move(outputs);
    result.arrays.push_back(std::move(predictions));
    if (labels != nullptr) {
      result.arrays.push_back(*labels);
      result.arrays.back().name = kLabels;
    }
  } else {
    result.arrays = std::move(outputs);
  }
  return result;
}

absl::Status WriteChunk(const std::string& path, const std::vector<Tensor>& arrays) {
  MAITRE_RETURN_IF_ERROR(MakeDirectories(fs::path(path).parent_path().string()));
  return WriteFileAtomically(path, WriteNpz(arrays));
}

absl::Status AssembleResult(const std::vector<std::string>& chunk_paths,
                            const std::string& result_path) {
  std::vector<std::vector<Tensor>> chunks;
  chunks.reserve(chunk_paths.size());
  for (const std::string& path : chunk_paths) {
    auto bytes = ReadFileToString(path);
    if (!bytes.ok()) {
      return absl::InternalError(absl::StrCat("a result chunk is missing: ", path));
    }
    MAITRE_ASSIGN_OR_RETURN(auto arrays, ParseNpz(*bytes));
    std::vector<Tensor> chunk;
    for (auto& [name, tensor] : arrays) chunk.push_back(std::move(tensor));
    chunks.push_back(std::move(chunk));
  }
  std::vector<const std::vector<Tensor>*> parts;
  for (const auto& c : chunks) parts.push_back(&c);
  auto joined = ConcatRows(parts);
  if (!joined.ok()) {
    return absl::InternalError(absl::StrCat("the chunks of ", result_path,
                                            " cannot be joined (were they served by models with "
                                            "different outputs? name a model for the job): ",
                                            joined.status().message()));
  }
  MAITRE_RETURN_IF_ERROR(WriteFileAtomically(result_path, WriteNpz(*joined)));
  std::error_code ec;
  for (const std::string& path : chunk_paths) fs::remove(path, ec);
  return absl::OkStatus();
}

}  // namespace maitre::jobs
