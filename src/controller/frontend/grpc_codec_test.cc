#include "controller/frontend/grpc_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <chrono>

namespace maitre::controller {
namespace {

inference::ModelInferRequest OneFp32Input() {
  inference::ModelInferRequest request;
  auto* in = request.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(2);
  in->mutable_contents()->add_fp32_contents(1.5f);
  in->mutable_contents()->add_fp32_contents(-2.0f);
  return request;
}

TEST(GrpcCodecTest, ReadsTypedContentsAndParameters) {
  inference::ModelInferRequest request = OneFp32Input();
  request.set_id("q");
  request.add_outputs()->set_name("y");
  (*request.mutable_parameters())["maitre_app"].set_string_param("fashion");
  (*request.mutable_parameters())["latency_ms"].set_int64_param(20);
  (*request.mutable_parameters())["min_accuracy"].set_double_param(0.5);
  auto parsed = FromModelInferRequest(request);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->id, "q");
  EXPECT_EQ(parsed->app, "fashion");
  EXPECT_DOUBLE_EQ(*parsed->requirements.latency_ms, 20);
  EXPECT_DOUBLE_EQ(*parsed->requirements.min_accuracy, 0.5);
  ASSERT_EQ(parsed->inputs.size(), 1u);
  EXPECT_EQ(parsed->inputs[0].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_FLOAT_EQ(parsed->inputs[0].As<float>()[1], -2.0f);
  ASSERT_EQ(parsed->outputs.size(), 1u);
  EXPECT_TRUE(parsed->outputs[0].binary);
}

// The gRPC codec accepted what the HTTP codec refuses: an unnamed input and
// requirements out of range (found by fuzz/grpc_infer_fuzzer, which checks
// that both accept the same queries), and narrow integers out of range,
// silently wrapped (found by reading the codec with the same question).
// Each is now refused as over HTTP, with a reason.
TEST(GrpcCodecTest, RefusesWhatTheHttpCodecRefuses) {
  struct Case {
    const char* what;
    inference::ModelInferRequest request;
    const char* says;
  };
  auto with_parameter = [](const char* key, auto set) {
    inference::ModelInferRequest r = OneFp32Input();
    set(&(*r.mutable_parameters())[key]);
    return r;
  };
  auto narrow_input = [](const char* dtype, auto set) {
    inference::ModelInferRequest r;
    auto* in = r.add_inputs();
    in->set_name("n");
    in->set_datatype(dtype);
    in->add_shape(1);
    set(in->mutable_contents());
    return r;
  };
  using Parameter = inference::InferParameter;
  using Contents = inference::InferTensorContents;
  inference::ModelInferRequest unnamed = OneFp32Input();
  unnamed.mutable_inputs(0)->clear_name();
  std::vector<Case> cases = {
      {"an input without a name", unnamed, "inputs[0] needs a name"},
      // An unbounded objective overflowed the deadline (FromMillis) later on.
      {"an infinite latency objective",
       with_parameter(
           "latency_ms",
           [](Parameter* p) { p->set_double_param(std::numeric_limits<double>::infinity()); }),
       "latency_ms\" must be between"},
      {"a latency objective over an hour",
       with_parameter("latency_ms", [](Parameter* p) { p->set_double_param(1e7); }),
       "latency_ms\" must be between"},
      {"a NaN accuracy",
       with_parameter(
           "min_accuracy",
           [](Parameter* p) { p->set_double_param(std::numeric_limits<double>::quiet_NaN()); }),
       "min_accuracy\" must be between"},
      {"a negative cost", with_parameter("max_cost", [](Parameter* p) { p->set_int64_param(-1); }),
       "max_cost\" must be between"},
      {"a cost that is not a number",
       with_parameter("max_cost", [](Parameter* p) { p->set_string_param("cheap"); }),
       "must be a number"},
      {"an INT8 value of 300", narrow_input("INT8", [](Contents* c) { c->add_int_contents(300); }),
       "out of range for INT8"},
      {"a UINT16 value of 65536",
       narrow_input("UINT16", [](Contents* c) { c->add_uint_contents(65536); }),
       "out of range for UINT16"},
  };
  for (const Case& c : cases) {
    auto parsed = FromModelInferRequest(c.request);
    ASSERT_FALSE(parsed.ok()) << c.what;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(parsed.status().message().find(c.says), std::string::npos)
        << c.what << " -> " << parsed.status().message();
  }
}

TEST(GrpcCodecTest, NarrowTypesKeepTheirWholeRange) {
  inference::ModelInferRequest r;
  auto* in = r.add_inputs();
  in->set_name("i16");
  in->set_datatype("INT16");
  in->add_shape(2);
  in->mutable_contents()->add_int_contents(-32768);
  in->mutable_contents()->add_int_contents(32767);
  auto parsed = FromModelInferRequest(r);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->inputs[0].As<int16_t>()[0], -32768);
  EXPECT_EQ(parsed->inputs[0].As<int16_t>()[1], 32767);
}

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

// gRPC's deadline (system clock) becomes one on the dispatcher's clock,
// keeping the time the client has left.
TEST(ClientDeadlineTest, KeepsTheTimeLeftOnTheDispatchersClock) {
  using std::chrono::milliseconds;
  const auto now = std::chrono::system_clock::now();
  const Nanos received = 5 * kSecond;
  EXPECT_EQ(ClientDeadline(std::chrono::system_clock::time_point::max(), now, received),
            std::nullopt);
  EXPECT_EQ(ClientDeadline(now + milliseconds(30), now, received),
            received + 30 * kMillisecond);
  // Passed while the call waited before its handler.
  EXPECT_EQ(ClientDeadline(now - milliseconds(4), now, received), received - 4 * kMillisecond);
  // A deadline decades away is a year, not an overflow.
  const auto far = now + std::chrono::hours(24 * 365 * 100);
  EXPECT_EQ(ClientDeadline(far, now, received), received + 365 * 24 * 3600 * kSecond);
}

}  // namespace
}  // namespace maitre::controller
