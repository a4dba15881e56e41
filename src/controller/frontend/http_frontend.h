// The HTTP front-end: the Open Inference Protocol core (health, metadata,
// /infer) and Maitre's extensions (apps, registration, repository index),
// as routes on the asynchronous HTTP server. Handlers never block an I/O
// thread: /infer hands the query to the dispatcher, and registration runs
// on the control work queue.
//
// Thread-safety: thread-safe.
#pragma once

#include <string>

#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"
#include "controller/dataplane/dispatcher.h"
#include "controller/access/http_access.h"
#include "controller/models/model_removal.h"
#include "controller/dataplane/backlog_shedder.h"
#include "controller/dataplane/in_flight_limit.h"
#include "controller/models/registrar.h"
#include "controller/pipelines/pipeline_book.h"
#include "controller/serving_metrics.h"
#include "core/work_queue.h"
#include "http/router.h"

namespace maitre::controller {

struct FrontendOptions {
  Catalog* catalog = nullptr;
  Cluster* cluster = nullptr;
  Dispatcher* dispatcher = nullptr;
  Registrar* registrar = nullptr;
  ModelRemover* remover = nullptr;
  WorkQueue* control = nullptr;
  ServingMetrics* metrics = nullptr;
  const HttpAccess* access = nullptr;  // who may reach each route
  KeyRing* keys = nullptr;  // a deleted app's keys are revoked; may be null
  // Bounds the queries in flight (may be null: no bound).
  InFlightLimit* in_flight = nullptr;
  // Sheds queries from a standing backlog before decoding them (may be
  // null: never).
  BacklogShedder* shedder = nullptr;
  // The registered pipelines (docs/pipelines.md, "Serving a pipeline"); may
  // be null: no pipeline routes.
  PipelineBook* pipelines = nullptr;
  const Clock* clock = SteadyClock::Get();
  std::string version = "0.1.0";
};

// Adds every route to `router`.
void AddHttpRoutes(const FrontendOptions& options, http::Router& router);

}  // namespace maitre::controller
