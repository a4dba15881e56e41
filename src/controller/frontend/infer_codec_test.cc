#include "controller/frontend/infer_codec.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace maitre::controller {
namespace {

using nlohmann::json;

TEST(InferCodecTest, ParsesFlatAndNestedJsonData) {
  auto flat = ParseInferRequest(
      R"({"id":"7","parameters":{"latency_ms":25,"min_accuracy":0.9},
          "inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[1,2.5,-3,4e-1]}],
          "outputs":[{"name":"y"}]})",
      -1);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->id, "7");
  EXPECT_DOUBLE_EQ(*flat->requirements.latency_ms, 25);
  EXPECT_DOUBLE_EQ(*flat->requirements.min_accuracy, 0.9);
  ASSERT_EQ(flat->inputs.size(), 1u);
  EXPECT_FLOAT_EQ(flat->inputs[0].As<float>()[1], 2.5f);
  EXPECT_FLOAT_EQ(flat->inputs[0].As<float>()[3], 0.4f);
  ASSERT_EQ(flat->outputs.size(), 1u);
  EXPECT_EQ(flat->outputs[0].name, "y");

  auto nested = ParseInferRequest(
      R"({"inputs":[{"name":"x","datatype":"INT64","shape":[2,2],"data":[[1,2],[3,-4]]}]})", -1);
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(nested->inputs[0].As<int64_t>()[3], -4);
  auto boolean = ParseInferRequest(
      R"({"inputs":[{"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]}]})", -1);
  ASSERT_TRUE(boolean.ok());
  EXPECT_EQ(boolean->inputs[0].As<uint8_t>()[0], 1);
}

// FLT_MAX printed to the nine digits that identify an FP32 lies above it
// but rounds back to it: a client echoing a value it was sent must not be
// refused (fuzz/corpus/infer_binary/found_flt_max_as_json).
TEST(InferCodecTest, TheLargestFp32PrintedAsADecimalIsAccepted) {
  auto largest = ParseInferRequest(
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],
                     "data":[3.40282347e+38,-3.40282347e+38]}]})",
      -1);
  ASSERT_TRUE(largest.ok()) << largest.status();
  EXPECT_EQ(largest->inputs[0].As<float>()[0], std::numeric_limits<float>::max());
  EXPECT_EQ(largest->inputs[0].As<float>()[1], -std::numeric_limits<float>::max());
}

TEST(InferCodecTest, RejectsBadRequestsWithAReason) {
  struct Case {
    const char* body;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"", "not valid JSON"},
           {"{", "not valid JSON"},
           {"7", "JSON object"},
           {"{}", "\"inputs\""},
           {R"({"inputs":[]})", "must not be empty"},
           {R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", "name"},
           {R"({"inputs":[{"name":"x","datatype":"F32","shape":[1],"data":[1]}]})", "F32"},
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[1]}]})", "shape"},
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1]}]})",
            "needs 2 values but data has 1"},
           {R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[300]}]})", "range"},
           {R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1.5]}]})",
            "integers"},
           {R"({"inputs":[{"name":"x","datatype":"FP16","shape":[1],"data":[1]}]})", "binary"},
           // Found by fuzz/infer_json_fuzzer: no value, so nothing refused BYTES.
           {R"({"inputs":[{"name":"e","datatype":"BYTES","shape":[0,5],"data":[]}]})",
            "BYTES is not supported"},
           {R"({"parameters":{"min_accuracy":2},"inputs":[]})", "min_accuracy"},
           {R"({"parameters":{"latency_ms":"fast"},"inputs":[]})", "latency_ms"},
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],
                "parameters":{"binary_data_size":4}}]})", "Inference-Header-Content-Length"},
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],
                "parameters":{"binary_data_size":4}}]})", "both \"data\" and binary_data_size"},
           // A size that is not an integer once let "data" win silently.
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],
                "parameters":{"binary_data_size":"4"}}]})", "binary_data_size must be a"},
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],
                "parameters":{"binary_data_size":4.0}}]})", "binary_data_size must be a"},
           // Past FP32's range a number would become an infinity; JSON itself
           // has no NaN or Infinity, and numbers past FP64's are not JSON.
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,-1e39]}]})",
            "out of range for FP32"},
           // Just past halfway beyond FLT_MAX: it would round to infinity.
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[3.4028236e38]}]})",
            "out of range for FP32"},
           {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[NaN]}]})",
            "not valid JSON"},
           {R"({"inputs":[{"name":"x","datatype":"FP64","shape":[1],"data":[1e400]}]})",
            "not valid JSON"},
       }) {
    auto r = ParseInferRequest(c.body, -1);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << c.body << " -> " << r.status().message();
  }
}

// The address space this process has mapped, from /proc/self/statm.
size_t MappedBytes() {
  unsigned long pages = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
  std::fclose(f);
  return pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// A shape is only the client's claim: 80 bytes declaring 2^31 - 1 FP64
// values (16 GiB) are refused without first making room for them (found by
// fuzz/infer_json_fuzzer). The parse runs in a child that may map 1 GiB
// more than it has, so that an allocation sized by the shape fails on any
// host, however much memory it has.
TEST(InferCodecDeathTest, ReservesNoMoreThanTheBodyCanHold) {
  const std::string body =
      R"({"inputs":[{"name":"x","datatype":"FP64","shape":[2147483647],"data":[1]}]})";
  EXPECT_EXIT(
      {
        rlimit limit{};
        getrlimit(RLIMIT_AS, &limit);
        limit.rlim_cur = MappedBytes() + (size_t{1} << 30);
        setrlimit(RLIMIT_AS, &limit);
        auto r = ParseInferRequest(body, -1);
        const bool refused =
            !r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument &&
            r.status().message().find("needs 2147483647 values") != absl::string_view::npos;
        std::_Exit(refused ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(InferCodecTest, BinaryDataExtensionRoundTrips) {
  std::string header =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},
                    {"name":"b","datatype":"INT64","shape":[1],"data":[9]},
                    {"name":"c","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}}],
          "outputs":[{"name":"y","parameters":{"binary_data":true}},{"name":"z"}]})";
  float a[2] = {1.5f, -2.0f};
  std::string body = header;
  body.append(reinterpret_cast<const char*>(a), sizeof a);
  body.append("\x01\x02\x03", 3);
  auto r = ParseInferRequest(body, static_cast<int64_t>(header.size()));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->inputs.size(), 3u);
  EXPECT_FLOAT_EQ(r->inputs[0].As<float>()[1], -2.0f);
  EXPECT_EQ(r->inputs[1].As<int64_t>()[0], 9);
  EXPECT_EQ(r->inputs[2].As<uint8_t>()[2], 3);
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_TRUE(r->outputs[0].binary);
  EXPECT_FALSE(r->outputs[1].binary);

  // Sizes that do not add up are refused.
  EXPECT_FALSE(ParseInferRequest(body, static_cast<int64_t>(body.size()) + 1).ok());
  EXPECT_FALSE(ParseInferRequest(body + "x", static_cast<int64_t>(header.size())).ok());
  EXPECT_FALSE(ParseInferRequest(body.substr(0, body.size() - 1),
                                 static_cast<int64_t>(header.size()))
                   .ok());

  InferResponse response;
  response.model_name = "m";
  response.model_version = "torch";
  float y[2] = {0.25f, 4.0f};
  response.outputs.push_back(
      Tensor{"y", DataType::kFp32, {1, 2}, std::string(reinterpret_cast<char*>(y), sizeof y)});
  response.outputs.push_back(Tensor{"z", DataType::kFp32, {1, 2}, response.outputs[0].data});
  EncodedResponse encoded = WriteInferResponse(response, r->outputs, false);
  ASSERT_GT(encoded.json_length, 0);
  json j = json::parse(encoded.body.substr(0, encoded.json_length));
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_FALSE(j["outputs"][0].contains("data"));
  EXPECT_EQ(j["outputs"][1]["data"], json({0.25, 4.0}));
  float back[2];
  std::memcpy(back, encoded.body.data() + encoded.json_length, sizeof back);
  EXPECT_FLOAT_EQ(back[1], 4.0f);
}

// A NaN or an infinity in binary data is refused with the element that
// holds it (core/finite.h): one such row once failed or changed every int8
// query batched with it.
TEST(InferCodecTest, RefusesNaNAndInfinityInBinaryData) {
  std::string header =
      R"({"inputs":[{"name":"input","datatype":"FP32","shape":[2,3],
                     "parameters":{"binary_data_size":24}}]})";
  struct Case {
    float value;
    const char* says;
  };
  for (const Case& c : {Case{NAN, "element 2 of row 1 is NaN"},
                        Case{INFINITY, "element 2 of row 1 is +Inf"},
                        Case{-INFINITY, "element 2 of row 1 is -Inf"}}) {
    float data[6] = {0.5f, 1e30f, -3.4e38f, 0, 1e-45f, c.value};
    std::string body = header + std::string(reinterpret_cast<const char*>(data), sizeof data);
    auto r = ParseInferRequest(body, static_cast<int64_t>(header.size()));
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(),
              absl::StrCat("input 'input': ", c.says, "; inputs must be finite numbers"));
  }
  // Extreme but finite values are a model's business, not the codec's.
  float finite[6] = {0.5f, 1e30f, -3.4e38f, 0, 1e-45f, -1e-30f};
  std::string body = header + std::string(reinterpret_cast<const char*>(finite), sizeof finite);
  EXPECT_TRUE(ParseInferRequest(body, static_cast<int64_t>(header.size())).ok());
}

TEST(InferCodecTest, WritesJsonResponsesWithTimings) {
  InferResponse response;
  response.model_name = "fmnist-cnn";
  response.model_version = "torch-opt";
  response.id = "a\"b";
  response.timings = {"w1", "cpu-2", 10, 200, 450, 4};
  float v[3] = {1, std::nanf(""), -0.5f};
  response.outputs.push_back(
      Tensor{"logits", DataType::kFp32, {1, 3}, std::string(reinterpret_cast<char*>(v), 12)});
  EncodedResponse encoded = WriteInferResponse(response, {}, false);
  EXPECT_EQ(encoded.json_length, -1);
  json j = json::parse(encoded.body);
  EXPECT_EQ(j["id"], "a\"b");
  EXPECT_EQ(j["model_version"], "torch-opt");
  EXPECT_EQ(j["parameters"]["worker_type"], "cpu-2");
  EXPECT_EQ(j["parameters"]["batch_size"], 4);
  EXPECT_EQ(j["outputs"][0]["data"], json({1.0, nullptr, -0.5}));
}

}  // namespace
}  // namespace maitre::controller
