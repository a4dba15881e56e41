#include "http/message.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/request_head.h"
#include "nlohmann/json.hpp"

namespace maitre::http {
namespace {

TEST(RequestTest, GetHeaderIsCaseInsensitiveAndFirstWins) {
  Request request;
  request.headers = {{"Content-Type", "application/json"}, {"X-Trace", "one"}, {"x-trace", "two"}};
  EXPECT_EQ(request.GetHeader("content-type"), "application/json");
  EXPECT_EQ(request.GetHeader("CONTENT-TYPE"), "application/json");
  EXPECT_EQ(request.GetHeader("X-TRACE"), "one");
  EXPECT_EQ(request.GetHeader("Missing"), "");
}

TEST(RequestTest, QueryParamDecodes) {
  Request request;
  request.query = "a=1&name=fmnist-cnn%3Atorch-opt&q=hello+world&empty=&flag&a=2&k%20ey=v";
  EXPECT_EQ(request.QueryParam("a"), "1");  // the first one
  EXPECT_EQ(request.QueryParam("name"), "fmnist-cnn:torch-opt");
  EXPECT_EQ(request.QueryParam("q"), "hello world");
  EXPECT_EQ(request.QueryParam("empty"), "");
  EXPECT_EQ(request.QueryParam("flag"), "");
  EXPECT_EQ(request.QueryParam("k ey"), "v");
  EXPECT_EQ(request.QueryParam("missing"), "");
}

TEST(RequestTest, QueryParamKeepsMalformedEscapes) {
  Request request;
  request.query = "p=100%&z=%zz";
  EXPECT_EQ(request.QueryParam("p"), "100%");
  EXPECT_EQ(request.QueryParam("z"), "%zz");
}

TEST(ResponseTest, Factories) {
  Response json = Response::Json(201, R"({"ok":true})");
  EXPECT_EQ(json.status, 201);
  EXPECT_EQ(json.content_type, "application/json");
  EXPECT_EQ(json.body, R"({"ok":true})");

  Response text = Response::Text(200, "hi");
  EXPECT_EQ(text.content_type, "text/plain; charset=utf-8");
}

TEST(ResponseTest, ErrorEscapesJson) {
  Response error = Response::Error(400, "bad \"name\"\n\\ end");
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.content_type, "application/json");
  nlohmann::json parsed = nlohmann::json::parse(error.body);
  EXPECT_EQ(parsed["error"], "bad \"name\"\n\\ end");
}

TEST(ResponseTest, ErrorSurvivesInvalidUtf8) {
  Response error = Response::Error(500, std::string("bad \xff byte"));
  nlohmann::json parsed = nlohmann::json::parse(error.body);
  EXPECT_THAT(parsed["error"].get<std::string>(), ::testing::HasSubstr("bad "));
}

TEST(PercentTest, DecodeAndEncode) {
  EXPECT_EQ(*PercentDecode("a%2Fb%3ac", false), "a/b:c");
  EXPECT_EQ(*PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(*PercentDecode("a+b", true), "a b");
  EXPECT_EQ(*PercentDecode("%00", false), std::string(1, '\0'));
  EXPECT_FALSE(PercentDecode("a%", false).ok());
  EXPECT_FALSE(PercentDecode("a%4", false).ok());
  EXPECT_FALSE(PercentDecode("a%g0", false).ok());

  EXPECT_EQ(PercentEncode("fmnist-cnn:torch opt/1"), "fmnist-cnn%3Atorch%20opt%2F1");
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  EXPECT_EQ(*PercentDecode(PercentEncode(all), false), all);
}

TEST(RequestHeadTest, FramesTheBodyItselfAndKeepsAGivenHost) {
  std::string head;
  AppendRequestHead(&head, "POST", "h:80", "/v2/x?a=1", 2,
                    {{"Content-Type", "application/json"}, {"content-length", "99"}});
  EXPECT_EQ(head,
            "POST /v2/x?a=1 HTTP/1.1\r\nHost: h:80\r\nContent-Length: 2\r\n"
            "Content-Type: application/json\r\n\r\n");
  head.clear();
  AppendRequestHead(&head, "GET", "h:80", "/", 0,
                    {{"host", "other"}, {"Transfer-Encoding", "chunked"}});
  EXPECT_EQ(head, "GET / HTTP/1.1\r\nContent-Length: 0\r\nhost: other\r\n\r\n");
}

}  // namespace
}  // namespace maitre::http
