#include "controller/frontend/grpc_codec.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/data_type_visit.h"
#include "core/finite.h"

namespace maitre::controller {
namespace {

using inference::InferParameter;
using inference::InferTensorContents;

template <typename Out, typename Field>
void AppendAs(const Field& values, std::string* data) {
  for (auto v : values) {
    Out o = static_cast<Out>(v);
    data->append(reinterpret_cast<const char*>(&o), sizeof o);
  }
}

// The typed contents field of the Open Inference Protocol that carries
// elements of type T: the narrow integer types share the 32-bit fields.
template <typename T>
const auto& ContentsOf(const InferTensorContents& c) {
  if constexpr (std::is_same_v<T, bool>) {
    return c.bool_contents();
  } else if constexpr (std::is_same_v<T, float>) {
    return c.fp32_contents();
  } else if constexpr (std::is_same_v<T, double>) {
    return c.fp64_contents();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return c.int64_contents();
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return c.uint64_contents();
  } else if constexpr (std::is_signed_v<T>) {
    return c.int_contents();
  } else {
    return c.uint_contents();
  }
}

// The typed contents field that carries `dtype`, copied into raw bytes.
// Returns the number of values found.
absl::StatusOr<int64_t> TypedContents(const InferTensorContents& c, DataType dtype,
                                      std::string* data) {
  return VisitDataType(
      dtype,
      [&](auto tag) -> absl::StatusOr<int64_t> {
        using T = typename decltype(tag)::type;
        // A bool is stored as one byte, as the binary forms carry it.
        using Stored = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
        const auto& values = ContentsOf<T>(c);
        // The narrow integer types arrive in 32-bit fields: a value they
        // cannot hold is refused, as the JSON codec refuses it, rather than
        // wrapped around.
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) < 4) {
          for (auto v : values) {
            if (static_cast<int64_t>(v) < std::numeric_limits<T>::min() ||
                static_cast<int64_t>(v) > std::numeric_limits<T>::max()) {
              return absl::InvalidArgumentError(
                  absl::StrCat("a value is out of range for ", DataTypeName(dtype)));
            }
          }
        }
        AppendAs<Stored>(values, data);
        return static_cast<int64_t>(values.size());
      },
      [&]() -> absl::StatusOr<int64_t> {
        return absl::InvalidArgumentError(absl::StrCat(
            DataTypeName(dtype), " has no typed contents field; send it in raw_input_contents"));
      });
}

absl::StatusOr<double> ReadNumber(const std::string& key, const InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case InferParameter::kDoubleParam:
      return p.double_param();
    case InferParameter::kInt64Param:
      return static_cast<double>(p.int64_param());
    case InferParameter::kUint64Param:
      return static_cast<double>(p.uint64_param());
    default:
      return absl::InvalidArgumentError(absl::StrCat("parameter ", key, " must be a number"));
  }
}

}  // namespace

absl::StatusOr<InferRequest> FromModelInferRequest(const inference::ModelInferRequest& request) {
  InferRequest out;
  out.id = request.id();
  bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "raw_input_contents has ", request.raw_input_contents_size(), " entries for ",
        request.inputs_size(), " inputs"));
  }
  if (request.inputs_size() == 0) return absl::InvalidArgumentError("the request has no inputs");
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& in = request.inputs(i);
    if (in.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "] needs a name"));
    }
    Tensor t;
    t.name = in.name();
    t.dtype = ParseDataType(in.datatype());
    if (t.dtype == DataType::kInvalid) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", in.name(), "': unknown datatype \"", in.datatype(), "\""));
    }
    t.shape.assign(in.shape().begin(), in.shape().end());
    if (raw) {
      if (in.has_contents()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", in.name(), "' has both contents and raw_input_contents"));
      }
      t.data = request.raw_input_contents(i);
    } else {
      auto count = TypedContents(in.contents(), t.dtype, &t.data);
      if (!count.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("input '", in.name(), "': ", count.status().message()));
      }
      if (*count != t.NumElements() && t.NumElements() >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("input '", in.name(), "': shape ", ShapeToString(t.shape), " needs ",
                         t.NumElements(), " values but contents has ", *count));
      }
    }
    if (absl::Status s = t.Validate(); !s.ok()) return s;
    if (absl::Status s = CheckFinite(t); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name(), "': ", s.message()));
    }
    out.inputs.push_back(std::move(t));
  }
  for (const auto& o : request.outputs()) out.outputs.push_back({o.name(), true});
  for (const auto& [key, value] : request.parameters()) {
    if (key == "maitre_app") {
      if (value.parameter_choice_case() != InferParameter::kStringParam) {
        return absl::InvalidArgumentError("parameter maitre_app must be a string");
      }
      out.app = value.string_param();
    } else if (IsRequirementParameter(key)) {
      absl::StatusOr<double> number = ReadNumber(key, value);
      if (!number.ok()) return number.status();
      if (absl::Status s = SetRequirement(key, *number, &out.requirements); !s.ok()) return s;
    }
  }
  return out;
}

void ToModelInferResponse(InferResponse&& response, inference::ModelInferResponse* out) {
  out->set_model_name(response.model_name);
  out->set_model_version(response.model_version);
  out->set_id(response.id);
  auto& params = *out->mutable_parameters();
  const InferTimings& t = response.timings;
  params["worker"].set_string_param(t.worker);
  params["worker_type"].set_string_param(t.worker_type);
  params["queue_us"].set_int64_param(t.queue_us);
  params["compute_us"].set_int64_param(t.compute_us);
  params["total_us"].set_int64_param(t.total_us);
  params["batch_size"].set_int64_param(t.batch_size);
  for (Tensor& tensor : response.outputs) {
    auto* o = out->add_outputs();
    o->set_name(tensor.name);
    o->set_datatype(std::string(DataTypeName(tensor.dtype)));
    o->mutable_shape()->Assign(tensor.shape.begin(), tensor.shape.end());
    out->add_raw_output_contents(std::move(tensor.data));
  }
}

std::optional<Nanos> ClientDeadline(std::chrono::system_clock::time_point deadline,
                                    std::chrono::system_clock::time_point now, Nanos received) {
  if (deadline == std::chrono::system_clock::time_point::max()) return std::nullopt;
  // Far deadlines saturate rather than overflow the clock's nanoseconds.
  const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::min(deadline - now, std::chrono::system_clock::duration(std::chrono::hours(24 * 365))));
  return received + left.count();
}

}  // namespace maitre::controller
