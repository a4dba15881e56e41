// Conversions between Maitre's core value types and the internal protocol
// (maitre.worker.v1), and between absl::Status and grpc::Status. Kept apart
// from core so that only code that speaks RPC sees protobuf headers.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"
#include "core/model_spec.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "core/variant.h"
#include "maitre/worker.pb.h"

namespace maitre::rpc {

namespace pb = ::maitre::worker::v1;

// Moves the bytes out of `from` when it is an rvalue.
Tensor FromProto(pb::Tensor&& from);
Tensor FromProto(const pb::Tensor& from);
void ToProto(Tensor&& from, pb::Tensor* to);

TensorSpec FromProto(const pb::TensorSpec& from);
void ToProto(const TensorSpec& from, pb::TensorSpec* to);

absl::StatusOr<VariantSpec> FromProto(const pb::VariantSpec& from);
void ToProto(const VariantSpec& from, pb::VariantSpec* to);

std::vector<LatencyPoint> FromProto(
    const google::protobuf::RepeatedPtrField<pb::BatchLatency>& from);
void ToProto(const std::vector<LatencyPoint>& from,
             google::protobuf::RepeatedPtrField<pb::BatchLatency>* to);

// absl and gRPC share their canonical code numbering.
grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace maitre::rpc
