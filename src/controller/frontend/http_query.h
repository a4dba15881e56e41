// The first and last steps every HTTP /infer route shares, whether the
// query goes to a model, an app or a pipeline (docs/api.md, "Open
// Inference Protocol core"): refuse a query that waited too long in the
// front-end's backlog, take a permit under the in-flight bound, parse the
// body (JSON, or the binary-data extension), and at the end
// turn the encoded answer into an HTTP response.
//
// Thread-safety: functions are thread-safe.
#pragma once

#include <optional>

#include "controller/dataplane/backlog_shedder.h"
#include "controller/dataplane/in_flight_limit.h"
#include "controller/frontend/infer_codec.h"
#include "controller/frontend/status_http.h"
#include "controller/serving_metrics.h"
#include "core/clock.h"
#include "http/message.h"
#include "http/responder.h"

namespace maitre::controller {

struct AcceptedQuery {
  InferRequest request;
  // When the query arrived: deadlines and reported times count from it.
  Nanos received = 0;
  // Held until the answer is handed over (may hold nothing: no bound).
  InFlightLimit::Permit permit;
};

// The query `request` carries, or nullopt when it was refused (shed from
// a standing backlog or over the in-flight bound: 429; a malformed body:
// 400), in which case `respond` was used. `shedder`, `in_flight` and
// `metrics` may be null.
std::optional<AcceptedQuery> AcceptHttpQuery(http::Request& request, BacklogShedder* shedder,
                                             InFlightLimit* in_flight, ServingMetrics* metrics,
                                             const Clock* clock, http::Responder& respond);

// A 200 carrying `encoded`, binary tensors following the JSON when it has
// them.
http::Response InferHttpResponse(EncodedResponse encoded);

}  // namespace maitre::controller
