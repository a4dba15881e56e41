#include "loadgen/codec.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace maitre::loadgen {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

Tensor Fp32(const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return t;
}

Tensor Int64(const std::string& name, std::vector<int64_t> values) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kInt64;
  t.shape = {1, static_cast<int64_t>(values.size())};
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  return t;
}

// Decodes a binary-extension body the way a server would, written from the
// extension's text rather than from the encoder: the first `json_length`
// bytes are JSON; each input with parameters.binary_data_size takes that
// many of the following bytes, in the order the inputs are listed.
std::vector<Tensor> DecodeBinary(const std::string& body, int64_t json_length, json* header) {
  *header = json::parse(body.substr(0, json_length));
  std::vector<Tensor> out;
  size_t offset = static_cast<size_t>(json_length);
  for (const json& input : (*header)["inputs"]) {
    Tensor t;
    t.name = input["name"];
    t.dtype = ParseDataType(input["datatype"].get<std::string>());
    t.shape = input["shape"].get<std::vector<int64_t>>();
    EXPECT_FALSE(input.contains("data")) << "binary inputs carry no JSON data";
    const size_t size = input["parameters"]["binary_data_size"].get<size_t>();
    EXPECT_LE(offset + size, body.size());
    t.data = body.substr(offset, size);
    offset += size;
    out.push_back(std::move(t));
  }
  EXPECT_EQ(offset, body.size()) << "no bytes may be left over";
  return out;
}

TEST(EncodeJsonRequestTest, WritesInputsAndOnlyTheParametersThatAreSet) {
  auto body = EncodeJsonRequest({Fp32("input", {1, 3}, {0.5f, -1.25f, 3.0f})}, {});
  ASSERT_TRUE(body.ok()) << body.status();
  json j = json::parse(*body);
  EXPECT_FALSE(j.contains("parameters"));
  ASSERT_EQ(j["inputs"].size(), 1u);
  EXPECT_EQ(j["inputs"][0]["name"], "input");
  EXPECT_EQ(j["inputs"][0]["datatype"], "FP32");
  EXPECT_EQ(j["inputs"][0]["shape"], json({1, 3}));
  EXPECT_EQ(j["inputs"][0]["data"], json({0.5, -1.25, 3.0}));

  RequestParameters p;
  p.latency_ms = 20;
  p.min_accuracy = 0.9;
  body = EncodeJsonRequest({Int64("ids", {7, -8})}, p);
  ASSERT_TRUE(body.ok());
  j = json::parse(*body);
  EXPECT_EQ(j["parameters"], json({{"latency_ms", 20.0}, {"min_accuracy", 0.9}}));
  EXPECT_EQ(j["inputs"][0]["data"], json({7, -8}));
}

TEST(EncodeJsonRequestTest, FloatsRoundTripExactly) {
  std::vector<float> values = {0.1f, 1.0f / 3, 1e-20f, 123456.79f};
  auto body = EncodeJsonRequest({Fp32("x", {1, 4}, values)}, {});
  ASSERT_TRUE(body.ok());
  json data = json::parse(*body)["inputs"][0]["data"];
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(static_cast<float>(data[i].get<double>()), values[i]);
  }
}

TEST(EncodeJsonRequestTest, EscapesNamesAndRefusesTypesWithoutJson) {
  auto body = EncodeJsonRequest({Fp32("a\"b\\c", {1, 1}, {1})}, {});
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(json::parse(*body)["inputs"][0]["name"], "a\"b\\c");

  Tensor half;
  half.name = "h";
  half.dtype = DataType::kFp16;
  half.shape = {1, 2};
  half.data.assign(4, '\0');
  auto refused = EncodeJsonRequest({half}, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("http-binary"));

  Tensor broken = Fp32("x", {1, 3}, {1, 2});  // 3 elements declared, 2 present
  EXPECT_FALSE(EncodeJsonRequest({broken}, {}).ok());
  EXPECT_FALSE(EncodeJsonRequest({}, {}).ok());
}

TEST(EncodeBinaryRequestTest, RoundTripsThroughAnIndependentDecoder) {
  std::vector<Tensor> inputs = {Fp32("image", {1, 2, 2}, {1, 2, 3, 4}),
                                Int64("ids", {5, 6, 7})};
  RequestParameters p;
  p.latency_ms = 12.5;
  p.binary_data_output = true;
  auto request = EncodeBinaryRequest(inputs, p);
  ASSERT_TRUE(request.ok()) << request.status();
  json header;
  std::vector<Tensor> decoded = DecodeBinary(request->body, request->json_length, &header);
  ASSERT_EQ(decoded.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(decoded[i].name, inputs[i].name);
    EXPECT_EQ(decoded[i].dtype, inputs[i].dtype);
    EXPECT_EQ(decoded[i].shape, inputs[i].shape);
    EXPECT_EQ(decoded[i].data, inputs[i].data);
  }
  EXPECT_EQ(header["parameters"]["binary_data_output"], true);
  EXPECT_EQ(header["parameters"]["latency_ms"], 12.5);
}

TEST(SerializeHttpRequestTest, WritesAHeadAndTheBody) {
  std::string wire = SerializeHttpRequest("POST", "127.0.0.1:8000", "/v2/models/m/infer",
                                          {{"Content-Type", "application/json"}}, "{}");
  EXPECT_EQ(wire,
            "POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Length: 2\r\n"
            "Content-Type: application/json\r\n\r\n{}");
}

TEST(ParseResponseTimingsTest, ReadsTheSplitFromParameters) {
  auto t = ParseResponseTimings(
      R"({"parameters":{"queue_us":120,"compute_us":800.0,"total_us":1000,"batch_size":6},)"
      R"("outputs":[]})",
      -1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->queue_us, 120);
  EXPECT_EQ(t->compute_us, 800);
  EXPECT_EQ(t->total_us, 1000);
  EXPECT_EQ(t->batch_rows, 6);
  EXPECT_EQ(t->variant, "");

  t = ParseResponseTimings(R"({"outputs":[]})", -1);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->queue_us, -1);
  EXPECT_EQ(t->total_us, -1);
  EXPECT_EQ(t->batch_rows, -1);

  t = ParseResponseTimings(R"({"model_name":"fmnist-cnn","model_version":"torch-opt"})", -1);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->variant, "fmnist-cnn:torch-opt");

  EXPECT_FALSE(ParseResponseTimings("not json", -1).ok());
  EXPECT_FALSE(ParseResponseTimings("[1,2]", -1).ok());
}

TEST(ParseResponseTimingsTest, ReadsOnlyTheJsonHeaderOfABinaryAnswer) {
  std::string header = R"({"parameters":{"queue_us":3,"compute_us":4,"total_us":9}})";
  std::string body = header + std::string("\x01\x02\x03\xff", 4);
  auto t = ParseResponseTimings(body, static_cast<int64_t>(header.size()));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->total_us, 9);
  EXPECT_FALSE(ParseResponseTimings(body, -1).ok());  // the binary tail is not JSON
  EXPECT_FALSE(ParseResponseTimings(body, static_cast<int64_t>(body.size()) + 1).ok());
}

TEST(ErrorMessageOfTest, PrefersTheErrorField) {
  EXPECT_EQ(ErrorMessageOf(R"({"error":"no model named 'x'"})"), "no model named 'x'");
  EXPECT_EQ(ErrorMessageOf("plain text"), "plain text");
}

}  // namespace
}  // namespace maitre::loadgen
