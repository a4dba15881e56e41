#include "core/batch.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace maitre {
namespace {

// Bytes in one row (everything after the batch dimension) of a valid tensor.
size_t RowBytes(const Tensor& t) {
  return t.shape[0] == 0 ? 0 : t.data.size() / static_cast<size_t>(t.shape[0]);
}

bool SameTrailingDims(const Tensor& a, const Tensor& b) {
  if (a.shape.size() != b.shape.size()) return false;
  for (size_t i = 1; i < a.shape.size(); ++i) {
    if (a.shape[i] != b.shape[i]) return false;
  }
  return true;
}

absl::Status CheckBatchable(const Tensor& t, size_t request) {
  if (absl::Status s = t.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", request, ": ", s.message()));
  }
  if (t.shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request, ": tensor '", t.name, "' has no batch dimension"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> ConcatRows(
    const std::vector<const std::vector<Tensor>*>& requests) {
  if (requests.empty()) return absl::InvalidArgumentError("no requests to batch");
  for (const std::vector<Tensor>* r : requests) {
    if (r == nullptr) return absl::InvalidArgumentError("a request is null");
  }
  const std::vector<Tensor>& first = *requests[0];
  if (first.empty()) return absl::InvalidArgumentError("request 0 has no tensors");

  std::vector<Tensor> joined;
  joined.reserve(first.size());
  for (size_t k = 0; k < first.size(); ++k) {
    const Tensor& proto = first[k];
    int64_t rows = 0;
    size_t bytes = 0;
    for (size_t r = 0; r < requests.size(); ++r) {
      const std::vector<Tensor>& req = *requests[r];
      if (req.size() != first.size()) {
        return absl::InvalidArgumentError(absl::StrCat("request ", r, " has ", req.size(),
                                                       " tensors; request 0 has ",
                                                       first.size()));
      }
      const Tensor& t = req[k];
      MAITRE_RETURN_IF_ERROR(CheckBatchable(t, r));
      if (t.name != proto.name || t.dtype != proto.dtype || !SameTrailingDims(t, proto)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "request ", r, ": tensor '", t.name, "' ", DataTypeName(t.dtype), " ",
            ShapeToString(t.shape), " cannot be batched with '", proto.name, "' ",
            DataTypeName(proto.dtype), " ", ShapeToString(proto.shape),
            " (names, datatypes and all dimensions after the first must match)"));
      }
      rows += t.shape[0];
      bytes += t.data.size();
    }
    Tensor out;
    out.name = proto.name;
    out.dtype = proto.dtype;
    out.shape = proto.shape;
    out.shape[0] = rows;
    out.data.reserve(bytes);
    for (const std::vector<Tensor>* req : requests) out.data.append((*req)[k].data);
    joined.push_back(std::move(out));
  }
  return joined;
}

absl::StatusOr<std::vector<Tensor>> TileRows(const std::vector<Tensor>& request, int copies) {
  if (copies < 1) return absl::InvalidArgumentError("a batch needs at least one copy");
  return ConcatRows(std::vector<const std::vector<Tensor>*>(static_cast<size_t>(copies), &request));
}

absl::StatusOr<std::vector<std::vector<Tensor>>> SplitRows(
    const std::vector<Tensor>& outputs, const std::vector<int64_t>& rows_per_request) {
  int64_t total = 0;
  for (int64_t rows : rows_per_request) {
    if (rows < 0 || rows > std::numeric_limits<int64_t>::max() - total) {
      return absl::InvalidArgumentError("row counts must be non-negative");
    }
    total += rows;
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k];
    MAITRE_RETURN_IF_ERROR(t.Validate());
    if (t.shape.empty() || t.shape[0] != total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", t.name, "' has shape ", ShapeToString(t.shape), " but the batch has ",
          total, " rows"));
    }
  }
  std::vector<std::vector<Tensor>> split(rows_per_request.size());
  for (size_t r = 0; r < split.size(); ++r) split[r].reserve(outputs.size());
  for (const Tensor& t : outputs) {
    size_t row_bytes = RowBytes(t);
    size_t offset = 0;
    for (size_t r = 0; r < rows_per_request.size(); ++r) {
      Tensor part;
      part.name = t.name;
      part.dtype = t.dtype;
      part.shape = t.shape;
      part.shape[0] = rows_per_request[r];
      size_t n = row_bytes * static_cast<size_t>(rows_per_request[r]);
      part.data.assign(t.data, offset, n);
      offset += n;
      split[r].push_back(std::move(part));
    }
  }
  return split;
}

}  // namespace maitre
