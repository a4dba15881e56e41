#include "controller/frontend/grpc_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace maitre::controller {
namespace {

inference::ModelInferRequest ImageRequest(const std::string& name) {
  inference::ModelInferRequest request;
  request.set_model_name("fmnist-mlp");
  auto* in = request.add_inputs();
  in->set_name(name);
  in->set_datatype("FP32");
  in->add_shape(2);
  in->add_shape(2);
  return request;
}

TEST(GrpcCodecTest, ReadsTypedAndRawContents) {
  inference::ModelInferRequest typed = ImageRequest("input");
  for (float v : {0.5f, 1e30f, -3.4e38f, 1e-45f}) {
    typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(v);
  }
  absl::StatusOr<InferRequest> r = FromModelInferRequest(typed);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_FLOAT_EQ(r->inputs[0].As<float>()[1], 1e30f);

  inference::ModelInferRequest raw = ImageRequest("input");
  float data[4] = {1, 2, 3, 4};
  raw.add_raw_input_contents(std::string(reinterpret_cast<const char*>(data), sizeof data));
  r = FromModelInferRequest(raw);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ(r->inputs[0].As<float>()[3], 4);
}

// The same refusals as the HTTP codec's: NaN and infinities name their
// element (core/finite.h), and an input needs a name (internally an unnamed
// tensor means "the model's only input", which a client must not rely on).
TEST(GrpcCodecTest, RefusesNaNInfinityAndUnnamedInputs) {
  inference::ModelInferRequest typed = ImageRequest("input");
  for (float v : {0.5f, 1.0f, NAN, 2.0f}) {
    typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(v);
  }
  absl::StatusOr<InferRequest> r = FromModelInferRequest(typed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "input 'input': element 0 of row 1 is NaN; inputs must be finite numbers");

  inference::ModelInferRequest raw = ImageRequest("input");
  float data[4] = {1, -INFINITY, 3, 4};
  raw.add_raw_input_contents(std::string(reinterpret_cast<const char*>(data), sizeof data));
  r = FromModelInferRequest(raw);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("element 1 of row 0 is -Inf"), std::string::npos)
      << r.status();

  inference::ModelInferRequest fp64 = ImageRequest("input");
  fp64.mutable_inputs(0)->set_datatype("FP64");
  for (double v : {1.0, 2.0, 3.0, static_cast<double>(INFINITY)}) {
    fp64.mutable_inputs(0)->mutable_contents()->add_fp64_contents(v);
  }
  r = FromModelInferRequest(fp64);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("is +Inf"), std::string::npos) << r.status();

  inference::ModelInferRequest unnamed = ImageRequest("");
  unnamed.add_raw_input_contents(std::string(sizeof data, '\0'));
  r = FromModelInferRequest(unnamed);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "inputs[0] needs a name");
}

}  // namespace
}  // namespace maitre::controller
