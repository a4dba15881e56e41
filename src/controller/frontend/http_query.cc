#include "controller/frontend/http_query.h"

#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/frontend/status_http.h"

namespace maitre::controller {

std::optional<AcceptedQuery> AcceptHttpQuery(http::Request& request, BacklogShedder* shedder,
                                             InFlightLimit* in_flight, ServingMetrics* metrics,
                                             const Clock* clock, http::Responder& respond) {
  AcceptedQuery query;
  // Deadlines count from the request's arrival (its head read by the
  // server), so time spent reading the body and queued for this handler
  // is charged to the query (docs/architecture.md, "How a query travels").
  const Nanos now = clock->Now();
  query.received = request.arrived != 0 ? request.arrived : now;
  const Nanos waited = now - query.received;  // in the front-end's backlog
  if (shedder != nullptr && shedder->ShouldShed(waited, now)) {
    absl::Status refused = absl::ResourceExhaustedError(absl::StrCat(
        "the server is overloaded: this query waited ", waited / 1'000'000,
        " ms in the front end's backlog, past its target of ",
        shedder->options().target / 1e6, " ms; retry later"));
    if (metrics != nullptr) {
      metrics->RecordQuery("", "", refused, nullptr);
      metrics->RecordShed();
    }
    std::move(respond)(ErrorResponse(refused));
    return std::nullopt;
  }
  if (in_flight != nullptr) {
    query.permit = in_flight->TryAcquire();
    if (!query.permit.held()) {
      absl::Status refused = absl::ResourceExhaustedError(in_flight->RefusalMessage());
      if (metrics != nullptr) metrics->RecordQuery("", "", refused, nullptr);
      std::move(respond)(ErrorResponse(refused));
      return std::nullopt;
    }
  }
  int64_t json_length = -1;
  absl::string_view header = request.GetHeader("Inference-Header-Content-Length");
  if (!header.empty() && (!absl::SimpleAtoi(header, &json_length) || json_length < 0)) {
    std::move(respond)(http::Response::Error(
        400, "Inference-Header-Content-Length must be a non-negative integer"));
    return std::nullopt;
  }
  auto parsed = ParseInferRequest(request.body, json_length);
  if (!parsed.ok()) {
    if (metrics != nullptr) metrics->RecordQuery("", "", parsed.status(), nullptr);
    std::move(respond)(ErrorResponse(parsed.status()));
    return std::nullopt;
  }
  query.request = *std::move(parsed);
  return query;
}

http::Response InferHttpResponse(EncodedResponse encoded) {
  http::Response response = http::Response::Json(200, std::move(encoded.body));
  if (encoded.json_length >= 0) {
    response.content_type = "application/octet-stream";
    response.headers.push_back(
        {"Inference-Header-Content-Length", std::to_string(encoded.json_length)});
  }
  return response;
}

}  // namespace maitre::controller
