#include "rpc/convert.h"

#include "absl/strings/str_cat.h"

namespace maitre::rpc {

Tensor FromProto(pb::Tensor&& from) {
  Tensor t;
  t.name = std::move(*from.mutable_name());
  t.dtype = ParseDataType(from.datatype());
  t.shape.assign(from.shape().begin(), from.shape().end());
  t.data = std::move(*from.mutable_data());
  return t;
}

Tensor FromProto(const pb::Tensor& from) {
  Tensor t;
  t.name = from.name();
  t.dtype = ParseDataType(from.datatype());
  t.shape.assign(from.shape().begin(), from.shape().end());
  t.data = from.data();
  return t;
}

void ToProto(Tensor&& from, pb::Tensor* to) {
  to->set_name(std::move(from.name));
  to->set_datatype(std::string(DataTypeName(from.dtype)));
  to->mutable_shape()->Assign(from.shape.begin(), from.shape.end());
  to->set_data(std::move(from.data));
}

TensorSpec FromProto(const pb::TensorSpec& from) {
  return TensorSpec{from.name(), ParseDataType(from.datatype()),
                    std::vector<int64_t>(from.shape().begin(), from.shape().end())};
}

void ToProto(const TensorSpec& from, pb::TensorSpec* to) {
  to->set_name(from.name);
  to->set_datatype(std::string(DataTypeName(from.dtype)));
  to->mutable_shape()->Assign(from.shape.begin(), from.shape.end());
}

absl::StatusOr<VariantSpec> FromProto(const pb::VariantSpec& from) {
  VariantSpec spec;
  spec.key = {from.model(), from.variant()};
  if (from.runtime() == "torch") {
    spec.runtime = Runtime::kTorch;
    spec.spec.format = ModelFormat::kTorchScript;
  } else if (from.runtime() == "opencv") {
    spec.runtime = Runtime::kOpenCv;
    spec.spec.format = ModelFormat::kOnnx;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown runtime \"", from.runtime(), "\""));
  }
  if (spec.key.model.empty() || spec.key.variant.empty() || from.blob().empty()) {
    return absl::InvalidArgumentError("a variant spec needs a model, a variant and a blob");
  }
  spec.blob = from.blob();
  spec.optimize_for_inference = from.optimize_for_inference();
  for (const auto& t : from.inputs()) spec.spec.inputs.push_back(FromProto(t));
  for (const auto& t : from.outputs()) spec.spec.outputs.push_back(FromProto(t));
  return spec;
}

void ToProto(const VariantSpec& from, pb::VariantSpec* to) {
  to->set_model(from.key.model);
  to->set_variant(from.key.variant);
  to->set_runtime(std::string(RuntimeName(from.runtime)));
  to->set_blob(from.blob);
  to->set_optimize_for_inference(from.optimize_for_inference);
  for (const auto& t : from.spec.inputs) ToProto(t, to->add_inputs());
  for (const auto& t : from.spec.outputs) ToProto(t, to->add_outputs());
}

std::vector<LatencyPoint> FromProto(
    const google::protobuf::RepeatedPtrField<pb::BatchLatency>& from) {
  std::vector<LatencyPoint> points;
  points.reserve(from.size());
  for (const auto& p : from) points.push_back({p.batch(), p.p50_ms(), p.p99_ms()});
  return points;
}

void ToProto(const std::vector<LatencyPoint>& from,
             google::protobuf::RepeatedPtrField<pb::BatchLatency>* to) {
  for (const LatencyPoint& p : from) {
    pb::BatchLatency* out = to->Add();
    out->set_batch(p.batch);
    out->set_p50_ms(p.p50_ms);
    out->set_p99_ms(p.p99_ms);
  }
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace maitre::rpc
