#include "controller/dispatcher.h"

#include "absl/strings/str_cat.h"
#include "controller/model_views.h"

namespace maitre::controller {

struct Dispatcher::Query {
  std::shared_ptr<const CatalogSnapshot> catalog;
  const CatalogModel* model = nullptr;
  const CatalogVariant* variant = nullptr;
  std::string id;
  std::vector<RequestedOutput> outputs;
  std::shared_ptr<const std::vector<Tensor>> inputs;
  Nanos received = 0;
  Nanos deadline = 0;
  bool best_effort = false;  // no latency objective
  int retries_left = 0;
  bool waited_for_load = false;
  InferDone done;
};

void Dispatcher::Infer(InferTarget target, InferRequest request, Nanos received,
                       InferDone done) {
  auto query = std::make_shared<Query>();
  query->done = std::move(done);
  query->received = received;
  query->catalog = options_.catalog->Get();
  query->model = query->catalog->FindModel(target.model);
  if (query->model == nullptr) return Finish(query, UnknownModelError(target.model));
  const CatalogModel& model = *query->model;
  if (!target.variant.empty()) {
    query->variant = model.FindVariant(target.variant);
    if (query->variant == nullptr) {
      return Finish(query, UnknownVariantError(model, target.variant));
    }
    if (!query->variant->ready()) {
      return Finish(query, absl::UnavailableError(absl::StrCat(
                               query->variant->spec.key.ToString(), " is not ready yet (",
                               query->variant->detail, ")")));
    }
  } else {
    query->variant = model.DefaultVariant();
    if (query->variant == nullptr) {
      return Finish(query, absl::UnavailableError(absl::StrCat(
                               "model '", model.name, "' has no ready variant yet")));
    }
  }
  auto rows = model.spec.CheckAndOrderInputs(&request.inputs);
  if (!rows.ok()) return Finish(query, rows.status());
  for (const RequestedOutput& requested : request.outputs) {
    bool known = false;
    for (const TensorSpec& out : model.spec.outputs) known |= out.name == requested.name;
    if (!known) {
      return Finish(query, absl::InvalidArgumentError(
                               absl::StrCat("model '", model.name, "' has no output named '",
                                            requested.name, "'")));
    }
  }
  Requirements requirements = request.requirements;
  if (const CatalogApp* app = query->catalog->FindApp(model.app)) {
    requirements = requirements.Or(app->defaults);
  }
  query->best_effort = !requirements.latency_ms.has_value();
  query->deadline = received + (requirements.latency_ms ? FromMillis(*requirements.latency_ms)
                                                        : options_.default_timeout);
  query->id = std::move(request.id);
  query->outputs = std::move(request.outputs);
  query->inputs = std::make_shared<const std::vector<Tensor>>(std::move(request.inputs));
  query->retries_left = options_.max_retries;
  Attempt(std::move(query));
}

void Dispatcher::Attempt(std::shared_ptr<Query> query) {
  const VariantKey& key = query->variant->spec.key;
  if (options_.clock->Now() >= query->deadline) {
    return Finish(query, absl::DeadlineExceededError(absl::StrCat(
                             "the deadline passed before ", key.ToString(), " could run it")));
  }
  if (std::optional<Route> route = options_.cluster->PickReady(key)) {
    return Send(std::move(query), *std::move(route));
  }
  if (query->waited_for_load) {
    // Loaded, but the instance went away before this query could use it.
    if (query->retries_left-- <= 0) {
      return Finish(query, absl::UnavailableError(
                               absl::StrCat(key.ToString(), " was loaded but is gone again")));
    }
  }
  query->waited_for_load = true;
  options_.placer->EnsureLoaded(*query->variant, [this, query](absl::Status status) mutable {
    if (!status.ok()) return Finish(query, status);
    Attempt(std::move(query));
  });
}

void Dispatcher::Send(std::shared_ptr<Query> query, Route route) {
  WorkerApi::InferOptions send;
  send.timeout = query->deadline - options_.clock->Now();
  send.reply_margin = options_.reply_margin;
  send.best_effort = query->best_effort;
  const VariantKey key = query->variant->spec.key;
  route.api->Infer(
      key, query->inputs, send,
      [this, query, key, worker = route.worker_id,
       worker_type = route.worker_type](absl::StatusOr<WorkerReply> reply) mutable {
        options_.cluster->Release(worker, key);
        if (!reply.ok()) {
          absl::StatusCode code = reply.status().code();
          // NOT_FOUND: the worker no longer holds the instance (it restarted);
          // UNAVAILABLE: the worker is unreachable. Both can succeed elsewhere.
          if (code == absl::StatusCode::kNotFound) options_.cluster->RemoveInstance(worker, key);
          if ((code == absl::StatusCode::kNotFound || code == absl::StatusCode::kUnavailable) &&
              query->retries_left-- > 0) {
            return Attempt(std::move(query));
          }
          if (code == absl::StatusCode::kNotFound) {
            return Finish(query, absl::UnavailableError(reply.status().message()));
          }
          if (code == absl::StatusCode::kDeadlineExceeded) {
            return Finish(query, absl::DeadlineExceededError(absl::StrCat(
                                     "the query's deadline of ",
                                     (query->deadline - query->received) / kMillisecond,
                                     " ms passed before ", key.ToString(), " answered it (",
                                     reply.status().message(), ")")));
          }
          return Finish(query, reply.status());
        }
        InferResponse response;
        response.model_name = query->model->name;
        response.model_version = key.variant;
        response.id = query->id;
        response.outputs = std::move(reply->outputs);
        if (!query->outputs.empty()) {
          std::vector<Tensor> kept;
          for (Tensor& t : response.outputs) {
            for (const RequestedOutput& requested : query->outputs) {
              if (t.name == requested.name) kept.push_back(std::move(t));
            }
          }
          response.outputs = std::move(kept);
        }
        response.timings.worker = worker;
        response.timings.worker_type = worker_type;
        response.timings.queue_us = reply->queue_us;
        response.timings.compute_us = reply->compute_us;
        response.timings.batch_size = reply->batch_size;
        Finish(query, std::move(response));
      });
}

void Dispatcher::Finish(std::shared_ptr<Query> query, absl::StatusOr<InferResponse> result) {
  if (result.ok()) {
    result->timings.total_us = (options_.clock->Now() - query->received) / kMicrosecond;
  }
  if (options_.metrics != nullptr) {
    // Only registered names become label values.
    options_.metrics->RecordQuery(query->model != nullptr ? query->model->name : "",
                                  query->variant != nullptr ? query->variant->spec.key.variant : "",
                                  result.status(), result.ok() ? &result->timings : nullptr);
  }
  std::move(query->done)(std::move(result));
}

}  // namespace maitre::controller
