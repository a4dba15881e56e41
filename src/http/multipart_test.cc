#include "http/multipart.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre::http {
namespace {

using ::testing::HasSubstr;

std::string Binary() {
  std::string data;
  for (int i = 0; i < 4096; ++i) data.push_back(static_cast<char>(i * 7 % 256));
  data += std::string("\0\r\n--\r\n\r\n", 9);  // boundary-like bytes and NULs
  return data;
}

TEST(MultipartTest, RoundTrip) {
  std::vector<Part> parts = {
      {"model", "model.onnx", "application/octet-stream", Binary()},
      {"meta", "", "application/json", R"({"framework": "onnx"})"},
      {"empty", "", "", ""},
      {"quote\"back\\slash", "we\"ird.bin", "", "x"},
  };
  std::string content_type;
  std::string body = EncodeMultipart(parts, &content_type);
  EXPECT_THAT(content_type, HasSubstr("multipart/form-data; boundary="));

  absl::StatusOr<std::vector<Part>> parsed = ParseMultipart(content_type, body);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ((*parsed)[i].name, parts[i].name);
    EXPECT_EQ((*parsed)[i].filename, parts[i].filename);
    EXPECT_EQ((*parsed)[i].content_type, parts[i].content_type);
    EXPECT_EQ((*parsed)[i].data, parts[i].data);
  }
  ASSERT_NE(FindPart(*parsed, "meta"), nullptr);
  EXPECT_EQ(FindPart(*parsed, "meta")->data, R"({"framework": "onnx"})");
  EXPECT_EQ(FindPart(*parsed, "nope"), nullptr);
}

TEST(MultipartTest, EmptyFormRoundTrips) {
  std::string content_type;
  std::string body = EncodeMultipart({}, &content_type);
  absl::StatusOr<std::vector<Part>> parsed = ParseMultipart(content_type, body);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->empty());
}

TEST(MultipartTest, ParsesACurlStyleBody) {
  // As curl -F sends it, with a preamble, quoted boundary and an epilogue.
  std::string body =
      "preamble to ignore\r\n"
      "--XyZ\r\n"
      "Content-Disposition: form-data; name=\"model\"; filename=\"m.pt\"\r\n"
      "Content-Type: application/octet-stream\r\n"
      "\r\n"
      "BYTES\r\n"
      "--XyZ  \r\n"
      "content-disposition: FORM-DATA; name=meta\r\n"
      "\r\n"
      "{}\r\n"
      "--XyZ--\r\n"
      "epilogue";
  absl::StatusOr<std::vector<Part>> parsed =
      ParseMultipart("Multipart/Form-Data; charset=utf-8; boundary=\"XyZ\"", body);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].name, "model");
  EXPECT_EQ((*parsed)[0].filename, "m.pt");
  EXPECT_EQ((*parsed)[0].content_type, "application/octet-stream");
  EXPECT_EQ((*parsed)[0].data, "BYTES");
  EXPECT_EQ((*parsed)[1].name, "meta");
  EXPECT_EQ((*parsed)[1].filename, "");
  EXPECT_EQ((*parsed)[1].content_type, "");
  EXPECT_EQ((*parsed)[1].data, "{}");
}

struct MalformedCase {
  const char* what;
  std::string content_type;
  std::string body;
  const char* message;
};

TEST(MultipartTest, MalformedInputIsInvalidArgument) {
  const std::string ct = "multipart/form-data; boundary=B";
  const std::string good_headers = "Content-Disposition: form-data; name=\"a\"\r\n\r\n";
  const std::vector<MalformedCase> cases = {
      {"not multipart", "application/json", "{}", "expected a multipart/form-data"},
      {"no boundary", "multipart/form-data", "--B--", "no boundary"},
      {"empty boundary", "multipart/form-data; boundary=", "--B--", "no boundary"},
      {"unterminated quote", "multipart/form-data; boundary=\"B", "", "unterminated quoted"},
      {"boundary absent from body", ct, "hello", "does not contain its boundary"},
      {"empty body", ct, "", "does not contain its boundary"},
      {"no closing boundary", ct, "--B\r\n" + good_headers + "data", "unterminated"},
      {"ends after boundary", ct, "--B\r\n" + good_headers + "data\r\n--B", "unterminated"},
      {"junk after boundary", ct, "--Bjunk\r\n" + good_headers + "x\r\n--B--", "malformed"},
      {"unterminated headers", ct, "--B\r\nContent-Disposition: form-data; name=a\r\n",
       "unterminated headers"},
      {"no content-disposition", ct, "--B\r\nContent-Type: text/plain\r\n\r\nx\r\n--B--",
       "no Content-Disposition"},
      {"no headers at all", ct, "--B\r\n\r\nx\r\n--B--", "no Content-Disposition"},
      {"no name", ct, "--B\r\nContent-Disposition: form-data; filename=\"f\"\r\n\r\nx\r\n--B--",
       "has no name"},
      {"not form-data", ct, "--B\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--B--",
       "not form-data"},
      {"header without colon", ct, "--B\r\nnonsense\r\n\r\nx\r\n--B--", "without ':'"},
  };
  for (const MalformedCase& c : cases) {
    absl::StatusOr<std::vector<Part>> parsed = ParseMultipart(c.content_type, c.body);
    ASSERT_FALSE(parsed.ok()) << c.what;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.message)) << c.what;
  }
}

TEST(MultipartTest, BoundaryNeverAppearsInData) {
  std::vector<Part> parts = {{"f", "", "", std::string(1000, '-')}};
  for (int i = 0; i < 20; ++i) {
    std::string content_type;
    std::string body = EncodeMultipart(parts, &content_type);
    absl::StatusOr<std::vector<Part>> parsed = ParseMultipart(content_type, body);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ((*parsed)[0].data, parts[0].data);
  }
}

}  // namespace
}  // namespace maitre::http
