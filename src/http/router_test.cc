#include "http/router.h"

#include <optional>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace maitre::http {
namespace {

using ::testing::HasSubstr;

// Routes a request in-process and returns what the Responder received.
Response RouteOnce(const Router& router, std::string method, std::string path,
                   std::string raw_path = "") {
  Request request;
  request.method = std::move(method);
  request.path = std::move(path);
  std::optional<Response> answer;
  router.Route(std::move(request),
               Responder::FromCallback([&answer](Response r) { answer = std::move(r); }), raw_path);
  EXPECT_TRUE(answer.has_value());
  return answer.value_or(Response{});
}

// A handler that answers with its name and parameters as JSON.
Handler Echo(std::string name) {
  return [name](Request&& request, const PathParams& params, Responder respond) {
    nlohmann::json json = {{"route", name}, {"method", request.method}};
    for (const auto& [key, value] : params) json["params"][key] = value;
    std::move(respond)(Response::Json(200, json.dump()));
  };
}

nlohmann::json Body(const Response& response) { return nlohmann::json::parse(response.body); }

Router MakeRouter() {
  Router router;
  router.Add("GET", "/v2/health/live", Echo("live"));
  router.Add("GET", "/v2", Echo("server"));
  router.Add("GET", "/v2/models/{name}", Echo("model"));
  router.Add("POST", "/v2/models/{name}/infer", Echo("infer"));
  router.Add("GET", "/v2/models/{name}/ready", Echo("ready"));
  router.Add("POST", "/v2/apps/{app}/models/{model}", Echo("register"));
  router.Add("POST", "/v2/repository/index", Echo("index"));
  router.Add("POST", "/v2/{thing}/index", Echo("thing-index"));
  router.Add("GET", "/files/{path...}", Echo("files"));
  router.Add("GET", "/", Echo("root"));
  EXPECT_TRUE(router.status().ok()) << router.status();
  return router;
}

TEST(RouterTest, MatchesLiteralsAndParams) {
  Router router = MakeRouter();
  EXPECT_EQ(Body(RouteOnce(router, "GET", "/v2/health/live"))["route"], "live");
  EXPECT_EQ(Body(RouteOnce(router, "GET", "/v2"))["route"], "server");
  EXPECT_EQ(Body(RouteOnce(router, "GET", "/"))["route"], "root");

  nlohmann::json infer = Body(RouteOnce(router, "POST", "/v2/models/resnet/infer"));
  EXPECT_EQ(infer["route"], "infer");
  EXPECT_EQ(infer["params"]["name"], "resnet");

  nlohmann::json reg = Body(RouteOnce(router, "POST", "/v2/apps/vision/models/resnet50"));
  EXPECT_EQ(reg["params"]["app"], "vision");
  EXPECT_EQ(reg["params"]["model"], "resnet50");
}

TEST(RouterTest, ParamMayContainColonAndDot) {
  Router router = MakeRouter();
  nlohmann::json body = Body(RouteOnce(router, "GET", "/v2/models/fmnist-cnn:torch-opt.v1"));
  EXPECT_EQ(body["route"], "model");
  EXPECT_EQ(body["params"]["name"], "fmnist-cnn:torch-opt.v1");
}

TEST(RouterTest, ParamsAreDecodedPerSegmentFromTheRawPath) {
  Router router = MakeRouter();
  // %2F inside a segment stays inside the parameter.
  nlohmann::json body = Body(RouteOnce(router, "GET", "/v2/models/a/b:c", "/v2/models/a%2Fb%3Ac"));
  EXPECT_EQ(body["route"], "model");
  EXPECT_EQ(body["params"]["name"], "a/b:c");

  Response bad = RouteOnce(router, "GET", "/v2/models/x", "/v2/models/%zz");
  EXPECT_EQ(bad.status, 400);
}

TEST(RouterTest, RestParamTakesTheRemainder) {
  Router router = MakeRouter();
  EXPECT_EQ(Body(RouteOnce(router, "GET", "/files/a/b/c.txt"))["params"]["path"], "a/b/c.txt");
  EXPECT_EQ(Body(RouteOnce(router, "GET", "/files/x"))["params"]["path"], "x");
  EXPECT_EQ(RouteOnce(router, "GET", "/files/").status, 404);
  EXPECT_EQ(RouteOnce(router, "GET", "/files").status, 404);
}

TEST(RouterTest, LiteralBeatsParam) {
  Router router = MakeRouter();
  EXPECT_EQ(Body(RouteOnce(router, "POST", "/v2/repository/index"))["route"], "index");
  nlohmann::json other = Body(RouteOnce(router, "POST", "/v2/other/index"));
  EXPECT_EQ(other["route"], "thing-index");
  EXPECT_EQ(other["params"]["thing"], "other");
}

TEST(RouterTest, UnknownPathIs404) {
  Router router = MakeRouter();
  for (const char* path : {"/v3", "/v2/models", "/v2/models/", "/v2/models//infer",
                           "/v2/health/live/", "/nothing/here", ""}) {
    Response response = RouteOnce(router, "GET", path);
    EXPECT_EQ(response.status, 404) << path;
    EXPECT_TRUE(Body(response).contains("error")) << path;
  }
}

TEST(RouterTest, WrongMethodIs405WithAllow) {
  Router router = MakeRouter();
  Response response = RouteOnce(router, "DELETE", "/v2/models/resnet");
  EXPECT_EQ(response.status, 405);
  EXPECT_EQ(response.GetHeader("Allow"), "GET");
  EXPECT_THAT(Body(response)["error"].get<std::string>(), HasSubstr("DELETE"));

  // Both the literal and the parameter route match this path.
  Response both = RouteOnce(router, "GET", "/v2/repository/index");
  EXPECT_EQ(both.status, 405);
  EXPECT_EQ(both.GetHeader("Allow"), "POST");
}

TEST(RouterTest, SamePathDifferentMethods) {
  Router router;
  router.Add("GET", "/x/{id}", Echo("get"));
  router.Add("PUT", "/x/{id}", Echo("put"));
  ASSERT_TRUE(router.status().ok());
  EXPECT_EQ(Body(RouteOnce(router, "PUT", "/x/1"))["route"], "put");
  Response response = RouteOnce(router, "POST", "/x/1");
  EXPECT_EQ(response.status, 405);
  EXPECT_EQ(response.GetHeader("Allow"), "GET, PUT");
}

TEST(RouterTest, BadPatternsAreRecorded) {
  for (const char* pattern :
       {"no-slash", "/a//b", "/a/", "/{}", "/{x", "/x}", "/a{x}", "/{rest...}/more", "/{x}/{x}"}) {
    Router router;
    router.Add("GET", pattern, Echo("x"));
    EXPECT_EQ(router.status().code(), absl::StatusCode::kInvalidArgument) << pattern;
  }
  Router duplicate;
  duplicate.Add("GET", "/a/{x}", Echo("1"));
  duplicate.Add("GET", "/a/{y}", Echo("2"));
  EXPECT_THAT(duplicate.status().message(), HasSubstr("duplicates"));

  Router empty_handler;
  empty_handler.Add("GET", "/a", nullptr);
  EXPECT_FALSE(empty_handler.status().ok());
}

TEST(RouterTest, HandlerGetsTheRequest) {
  Router router;
  std::string seen_body;
  std::string seen_param;
  router.Add("POST", "/echo/{x}",
             [&](Request&& request, const PathParams& params, Responder respond) {
               seen_body = std::move(request.body);
               seen_param = params.at("x");
               std::move(respond)(Response::Text(200, "ok"));
             });
  Request request;
  request.method = "POST";
  request.path = "/echo/42";
  request.body = std::string("a\0b", 3);
  std::optional<Response> answer;
  router.Route(std::move(request),
               Responder::FromCallback([&](Response r) { answer = std::move(r); }));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->body, "ok");
  EXPECT_EQ(seen_body, std::string("a\0b", 3));
  EXPECT_EQ(seen_param, "42");
}

TEST(ResponderTest, DroppedResponderAnswers500Once) {
  int calls = 0;
  std::optional<Response> answer;
  {
    Responder responder = Responder::FromCallback([&](Response r) {
      ++calls;
      answer = std::move(r);
    });
    Responder moved = std::move(responder);
    EXPECT_FALSE(responder);  // NOLINT(bugprone-use-after-move): checking the moved-from state
    EXPECT_TRUE(moved);
  }
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 500);
}

TEST(ResponderTest, AnsweredResponderDoesNotAnswerAgain) {
  int calls = 0;
  {
    Responder responder = Responder::FromCallback([&](Response) { ++calls; });
    std::move(responder)(Response::Text(200, "x"));
    EXPECT_FALSE(responder);  // NOLINT(bugprone-use-after-move)
  }
  EXPECT_EQ(calls, 1);
}

TEST(ResponderTest, OverwritingAPendingResponderDropsIt) {
  std::vector<int> statuses;
  Responder a = Responder::FromCallback([&](Response r) { statuses.push_back(r.status); });
  Responder b = Responder::FromCallback([&](Response r) { statuses.push_back(r.status + 1); });
  a = std::move(b);  // the first one is dropped: 500
  EXPECT_EQ(statuses, std::vector<int>({500}));
  std::move(a)(Response::Text(200, ""));
  EXPECT_EQ(statuses, std::vector<int>({500, 201}));
}

}  // namespace
}  // namespace maitre::http
