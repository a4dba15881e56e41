#include "controller/dataplane/dispatcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/cores.h"
#include "core/logging.h"
#include "controller/frontend/model_views.h"
#include "policy/admission.h"

namespace maitre::controller {

struct Dispatcher::Query {
  std::shared_ptr<const CatalogSnapshot> catalog;
  // What the policy may choose among: the app's variants, the model's, or
  // the one pinned.
  enum class Scope { kApp, kModel, kVariant } scope = Scope::kApp;
  const CatalogApp* app = nullptr;  // null only for a model whose app is gone
  const CatalogModel* model = nullptr;
  const CatalogVariant* pinned = nullptr;
  // The variant serving the query, once chosen.
  const CatalogVariant* variant = nullptr;
  bool inputs_checked = false;
  Requirements requirements;
  std::string id;
  std::vector<RequestedOutput> outputs;
  std::vector<Tensor> unchecked_inputs;  // until the model is known
  std::shared_ptr<const std::vector<Tensor>> inputs;
  Nanos received = 0;
  Nanos deadline = 0;   // give up: the objective plus the serving allowance
  Nanos objective = 0;  // the latency objective (0: none)
  bool best_effort = false;  // no latency objective
  int retries_left = 0;
  bool waited_for_load = false;
  // Sent to the burst pool by the Bouncer: its routes are the pool's.
  bool in_burst_pool = false;
  // The Bouncer's estimate of the answer when it last admitted the query to
  // a worker, and when (0: not judged), compared with the answer at Finish.
  Nanos bouncer_estimate = 0;
  Nanos bouncer_at = 0;
  // Workers this query was lost on (their call failed as unreachable): it
  // is never sent, nor waits for a load, there again.
  std::vector<std::string> lost_on;
  std::atomic<bool> finished{false};
  // The deadline timer's entry (0: none yet), cancelled once answered.
  // Atomic because the timer's own closure may answer before Infer stores it.
  std::atomic<uint64_t> deadline_timer_seq{0};
  InferDone done;
  // Where the query was last sent, for the deadline's message (built only
  // if the deadline fires).
  absl::Mutex sent_mu;
  const CatalogVariant* sent_variant ABSL_GUARDED_BY(sent_mu) = nullptr;
  std::string sent_worker ABSL_GUARDED_BY(sent_mu);
  // What the query waits for while it is not sent ("a worker to join", "a
  // load of m:v"), for the same message.
  std::string waited_for ABSL_GUARDED_BY(sent_mu);
};

namespace {

std::string DeadlinePassed(Nanos deadline, Nanos received, absl::string_view answerer) {
  return absl::StrCat("the query's deadline of ", (deadline - received) / kMillisecond,
                      " ms passed before ", answerer, " answered it");
}

}  // namespace

Dispatcher::Dispatcher(Options options) : options_(options) {
  const std::vector<int> cores = AllowedCores();
  const int lanes =
      std::clamp(static_cast<int>(cores.size()), 1, std::max(1, options_.deadline_timer_lanes));
  deadline_timer_ = std::make_unique<TimerThread>(options_.clock, lanes);
  if (lanes > 1) {
    if (absl::Status s = deadline_timer_->PinLanes(cores); !s.ok()) {
      spdlog::info("dispatcher: {}", s.message());
    }
  }
  // Expired queries are answered from these threads; in a burst on a small
  // host an ordinary thread's wake-up could wait behind the busy ones.
  if (absl::Status s = deadline_timer_->RaiseToRealtime(); !s.ok()) {
    spdlog::info("dispatcher: {}; 504s may leave late on a busy host", s.message());
  }
}

Dispatcher::~Dispatcher() = default;

void Dispatcher::Infer(InferTarget target, InferRequest request, Nanos received,
                       InferDone done) {
  auto query = std::make_shared<Query>();
  query->done = std::move(done);
  query->received = received;
  query->catalog = options_.catalog->Get();
  const CatalogSnapshot& catalog = *query->catalog;
  if (target.model.empty()) {
    query->scope = Query::Scope::kApp;
    query->app = catalog.FindApp(target.app);
    if (query->app == nullptr) {
      return Finish(query, absl::NotFoundError(absl::StrCat(
                               "no app named '", target.app, "'; GET /v2/apps lists them")));
    }
  } else {
    query->scope = Query::Scope::kModel;
    query->model = catalog.FindModel(target.model);
    if (query->model == nullptr) return Finish(query, UnknownModelError(target.model));
    query->app = catalog.FindApp(query->model->app);
    if (!target.variant.empty()) {
      query->scope = Query::Scope::kVariant;
      query->pinned = query->model->FindVariant(target.variant);
      if (query->pinned == nullptr) {
        return Finish(query, UnknownVariantError(*query->model, target.variant));
      }
      if (!query->pinned->ready()) {
        return Finish(query, absl::UnavailableError(absl::StrCat(
                                 query->pinned->spec.key.ToString(), " is not ready (",
                                 query->pinned->detail, ")")));
      }
    }
  }
  query->requirements = request.requirements;
  if (query->app != nullptr) {
    Requirements defaults = query->app->defaults;
    if (request.offline) defaults.latency_ms.reset();
    query->requirements = request.requirements.Or(defaults);
  }
  const std::optional<double>& latency = query->requirements.latency_ms;
  query->best_effort = !latency.has_value();
  if (latency) query->objective = received + FromMillis(*latency);
  query->deadline = received + (latency ? FromMillis(*latency) + options_.serving_allowance
                                        : options_.default_timeout);
  // A client that will stop waiting sooner bounds both: the worker then
  // aims at the client's deadline, and admission judges by it.
  if (request.client_deadline) {
    query->deadline = std::min(query->deadline, *request.client_deadline);
    if (latency) query->objective = std::min(query->objective, *request.client_deadline);
  }
  query->id = std::move(request.id);
  query->outputs = std::move(request.outputs);
  query->unchecked_inputs = std::move(request.inputs);
  query->retries_left = options_.max_retries;
  // A query that names a model is checked before anything is loaded for it.
  if (query->model != nullptr) {
    const VariantKey key = query->pinned != nullptr ? query->pinned->spec.key
                                                    : VariantKey{query->model->name, ""};
    if (absl::Status s = Choose(*query, key); !s.ok()) return Finish(query, s);
    query->variant = query->pinned;
  }
  // Before the deadline timer: a refusal is answered without touching it.
  if (!Admit(query)) return;
  const bool to_burst_pool = query->in_burst_pool;
  const TimerThread::Handle timer =
      deadline_timer_->Schedule(query->deadline, [this, weak = std::weak_ptr<Query>(query)] {
        if (std::shared_ptr<Query> q = weak.lock()) Expire(q);
      });
  query->deadline_timer_seq.store(timer.seq, std::memory_order_relaxed);
  if (to_burst_pool) return AttemptBurst(std::move(query));
  Attempt(std::move(query));
}

absl::Status Dispatcher::DeadlineError(Query& query) {
  std::string answerer = "any instance";
  std::string waited;
  {
    absl::MutexLock lock(&query.sent_mu);
    if (query.sent_variant != nullptr) {
      answerer = absl::StrCat(query.sent_variant->spec.key.ToString(), " on ", query.sent_worker);
    } else if (!query.waited_for.empty()) {
      waited = absl::StrCat("; it was waiting for ", query.waited_for);
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat(DeadlinePassed(query.deadline, query.received, answerer), waited));
}

void Dispatcher::Expire(const std::shared_ptr<Query>& query) {
  if (query->finished.load(std::memory_order_acquire)) return;
  // The timer has let go of this entry (another lane's copy does nothing),
  // so Finish need not cancel it: cancelling takes every lane's lock, which
  // a stalled thread may hold.
  query->deadline_timer_seq.store(0, std::memory_order_relaxed);
  Finish(query, DeadlineError(*query));
}

absl::Status Dispatcher::Choose(Query& query, const VariantKey& key) {
  if (query.model == nullptr || query.model->name != key.model) {
    query.model = query.catalog->FindModel(key.model);
    if (query.model == nullptr) return UnknownModelError(key.model);
  }
  if (!key.variant.empty()) {
    query.variant = query.model->FindVariant(key.variant);
    if (query.variant == nullptr) return UnknownVariantError(*query.model, key.variant);
  }
  if (query.inputs_checked) return absl::OkStatus();
  const CatalogModel& model = *query.model;
  auto rows = model.spec.CheckAndOrderInputs(&query.unchecked_inputs);
  if (!rows.ok()) return rows.status();
  for (const RequestedOutput& requested : query.outputs) {
    bool known = false;
    for (const TensorSpec& out : model.spec.outputs) known |= out.name == requested.name;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat("model '", model.name,
                                                     "' has no output named '", requested.name,
                                                     "'"));
    }
  }
  query.inputs = std::make_shared<const std::vector<Tensor>>(std::move(query.unchecked_inputs));
  query.inputs_checked = true;
  return absl::OkStatus();
}

bool Dispatcher::Admit(const std::shared_ptr<Query>& query) {
  // A model-less query is judged by the selection policy's own estimate
  // over all the app's variants.
  if (!options_.admission_control || query->model == nullptr) return true;
  const VariantKey key = query->pinned != nullptr ? query->pinned->spec.key
                                                  : VariantKey{query->model->name, ""};
  const AdmissionView view = options_.cluster->AdmissionCandidates(key);
  const Nanos time_left = query->deadline - options_.clock->Now();
  const policy::AdmissionVerdict verdict = policy::Admit(view.candidates, time_left, RowsOf(*query));
  if (verdict.admit) return true;
  if (Bounce(query)) return true;  // Infer sends it to the pool
  CountRefused(*query);
  Finish(query, absl::ResourceExhaustedError(
                    policy::RefusalMessage(query->model->name, verdict.best_finish, time_left)));
  return false;
}

void Dispatcher::Attempt(std::shared_ptr<Query> query) {
  if (query->finished.load(std::memory_order_acquire)) return;  // its deadline answered it
  // A retry that comes after the deadline (a poll for a worker woken late
  // on a busy host) answers as the deadline's timer would have.
  if (options_.clock->Now() >= query->deadline) return Finish(query, DeadlineError(*query));
  std::shared_ptr<const policy::SelectionIndex> index = options_.cluster->selection_index();
  policy::SelectionRequest request;
  switch (query->scope) {
    case Query::Scope::kVariant:
      request.pinned = index->FindVariant(query->pinned->spec.key);
      break;
    case Query::Scope::kModel:
      request.model = index->FindModel(query->model->name);
      break;
    case Query::Scope::kApp:
      request.app = index->FindApp(query->app->name);
      break;
  }
  if (request.pinned == policy::kNoId && request.model == policy::kNoId &&
      request.app == policy::kNoId) {
    if (query->scope == Query::Scope::kApp) {
      return Finish(query, absl::UnavailableError(absl::StrCat(
                               "app '", query->app->name,
                               "' has no profiled variant yet; its models are being profiled")));
    }
    return AttemptUnprofiled(std::move(query));
  }
  request.requirements = query->requirements;
  request.now = options_.clock->Now();
  request.deadline = query->deadline;
  LoadWaiter waiter = [this, query](absl::Status status) mutable {
    OnLoadDone(std::move(query), std::move(status));
  };
  SelectionResult result = options_.cluster->Select(request, waiter, query->lost_on);
  if (result.load.has_value()) {
    const CatalogModel* model = query->catalog->FindModel(result.load->variant.model);
    const CatalogVariant* variant =
        model != nullptr ? model->FindVariant(result.load->variant.variant) : nullptr;
    if (variant != nullptr) {
      options_.placer->StartLoad(result.load->worker_id, *variant, 1);
    } else {
      options_.cluster->FinishLoad(result.load->worker_id, result.load->variant,
                                   absl::NotFoundError("the variant left the catalog"));
    }
  }
  using policy::SelectionOutcome;
  switch (result.decision.outcome) {
    case SelectionOutcome::kUnsatisfiable:
      // No option in scope at all: the variants are not profiled yet.
      if (result.decision.closest == policy::kNoId && query->scope != Query::Scope::kApp) {
        return AttemptUnprofiled(std::move(query));
      }
      if (result.decision.closest == policy::kNoId) {
        return Finish(query, absl::UnavailableError(absl::StrCat(
                                 "app '", query->app->name,
                                 "' has no profiled variant yet; its models are being profiled")));
      }
      return Finish(query, absl::FailedPreconditionError(result.explanation));
    case SelectionOutcome::kUnavailable: {
      const policy::UnavailableReason why = result.decision.unavailable;
      // The pool answers now what would wait for a worker on its way (a
      // spot worker's replacement, say).
      if (Bounce(query)) return AttemptBurst(std::move(query));
      if ((why == policy::UnavailableReason::kNoRoom ||
           why == policy::UnavailableReason::kBusy) &&
          WorkersOnTheirWay()) {
        WaitsFor(*query, "a worker to join");
        return AttemptLater(std::move(query), options_.worker_wait_poll);
      }
      CountRefused(*query);
      // Busy instances and no room for more: overloaded (429, as admission
      // control says it), not unavailable.
      return Finish(query, why == policy::UnavailableReason::kDeadline
                               ? absl::DeadlineExceededError(result.explanation)
                           : why == policy::UnavailableReason::kBusy
                               ? absl::ResourceExhaustedError(result.explanation)
                               : absl::UnavailableError(result.explanation));
    }
    default:
      break;
  }
  if (absl::Status s = Choose(*query, result.variant); !s.ok()) {
    if (result.route.has_value()) options_.cluster->Release(result.route->worker_id, result.variant);
    return Finish(query, s);
  }
  if (result.waiting_for_load) {  // the waiter runs Attempt again
    return WaitsFor(*query, absl::StrCat("a load of ", result.variant.ToString()));
  }
  if (!result.route.has_value()) {
    return Finish(query, absl::UnavailableError("no instance could take the query"));
  }
  if (options_.burst_pool != nullptr) {
    Nanos estimate = 0;
    const bool late = Late(*query, *result.route, result.variant, &estimate);
    if (late && Bounce(query)) {
      options_.cluster->Release(result.route->worker_id, result.variant);
      return AttemptBurst(std::move(query));
    }
    // Only what the Bouncer admitted is tallied: a late query the full
    // pool could not take goes to the instance all the same.
    query->bouncer_estimate = late ? 0 : estimate;
    query->bouncer_at = options_.clock->Now();
  }
  Send(std::move(query), *std::move(result.route));
}

bool Dispatcher::Late(const Query& query, const Route& route, const VariantKey& key,
                      Nanos* estimate) const {
  *estimate = 0;
  AdmissionView view = options_.cluster->AdmissionCandidates(key, route.worker_id);
  if (view.candidates.empty()) return false;
  policy::AdmissionCandidate& candidate = view.candidates.front();
  candidate.waiting = std::max<int64_t>(0, candidate.waiting - 1);  // the route counted it
  return !policy::AnswersInTime(candidate, query.deadline - options_.clock->Now(), RowsOf(query),
                                estimate);
}

bool Dispatcher::Bounce(const std::shared_ptr<Query>& query) {
  if (options_.burst_pool == nullptr) return false;
  if (!options_.burst_pool->HasRoom() ||
      options_.burst_pool->cluster().reachable_worker_count() == 0) {
    options_.burst_pool->CountFull();
    return false;  // answered as without a pool
  }
  // The pool runs what the query was bound to, else the most accurate ready
  // variant in its scope (as the simulator's pool does).
  const CatalogVariant* variant = query->pinned != nullptr ? query->pinned : query->variant;
  if (variant == nullptr) {
    std::vector<const CatalogModel*> models;
    if (query->model != nullptr) {
      models.push_back(query->model);
    } else if (query->app != nullptr) {
      for (const std::string& name : query->app->models) {
        if (const CatalogModel* m = query->catalog->FindModel(name)) models.push_back(m);
      }
    }
    for (const CatalogModel* m : models) {
      for (const CatalogVariant& v : m->variants) {
        if (v.ready() && (variant == nullptr || v.accuracy > variant->accuracy)) variant = &v;
      }
    }
  }
  if (variant == nullptr || !Choose(*query, variant->spec.key).ok()) return false;
  query->variant = variant;
  query->in_burst_pool = true;
  // It reaches no provisioned instance: demand the allocator must see.
  CountRefused(*query);
  return true;
}

void Dispatcher::AttemptBurst(std::shared_ptr<Query> query) {
  if (query->finished.load(std::memory_order_acquire)) return;  // its deadline answered it
  if (options_.clock->Now() >= query->deadline) {
    return Finish(query, absl::DeadlineExceededError(
                             "the deadline passed before the burst pool could run the query"));
  }
  LoadWaiter waiter = [this, query](absl::Status status) mutable {
    if (!status.ok()) return Finish(query, status);
    AttemptBurst(std::move(query));
  };
  BurstPool::Taken taken = options_.burst_pool->Take(
      *query->variant, query->deadline - options_.clock->Now(), waiter, query->lost_on);
  switch (taken.kind) {
    case BurstPool::Taken::Kind::kRoute: {
      // Charged by the request now (BurstPool::Take), answered or not.
      const std::string* app = AppOf(*query);
      if (options_.app_usage != nullptr && app != nullptr) {
        options_.app_usage->AddRequest(*app, taken.route->worker_type);
      }
      return Send(std::move(query), *std::move(taken.route));
    }
    case BurstPool::Taken::Kind::kWaiting:
      return WaitsFor(*query, absl::StrCat("the burst pool's load of ",
                                           query->variant->spec.key.ToString()));
    case BurstPool::Taken::Kind::kFull:
      break;
  }
  Finish(query, absl::ResourceExhaustedError(absl::StrCat(
                    "no instance of ", query->variant->spec.key.ToString(),
                    " can answer the query within its deadline, and ", taken.why)));
}

Cluster& Dispatcher::ClusterOf(const Query& query) const {
  return query.in_burst_pool ? options_.burst_pool->cluster() : *options_.cluster;
}

void Dispatcher::Release(const Query& query, const std::string& worker, const VariantKey& key,
                         bool answered, ReplyTimes times) {
  if (query.in_burst_pool) return options_.burst_pool->Release(worker, key, answered, times);
  options_.cluster->Release(worker, key, times);
}

void Dispatcher::Retry(std::shared_ptr<Query> query) {
  if (query->in_burst_pool) return AttemptBurst(std::move(query));
  Attempt(std::move(query));
}

int64_t Dispatcher::RowsOf(const Query& query) {
  const std::vector<Tensor>& inputs =
      query.inputs_checked ? *query.inputs : query.unchecked_inputs;
  const int64_t rows = inputs.empty() || inputs[0].shape.empty() ? 1 : inputs[0].shape[0];
  return std::max<int64_t>(rows, 1);
}

const std::string* Dispatcher::AppOf(const Query& query) {
  return query.app != nullptr     ? &query.app->name
         : query.model != nullptr ? &query.model->app
                                  : nullptr;
}

void Dispatcher::CountRefused(const Query& query) {
  if (options_.refused == nullptr) return;
  if (const std::string* app = AppOf(query)) options_.refused->Add(*app, RowsOf(query));
}

void Dispatcher::AttemptUnprofiled(std::shared_ptr<Query> query) {
  if (query->variant == nullptr) query->variant = query->model->DefaultVariant();
  if (query->variant == nullptr) {
    return Finish(query, absl::UnavailableError(
                             absl::StrCat("model '", query->model->name,
                                          "' has no ready variant yet")));
  }
  const VariantKey& key = query->variant->spec.key;
  if (std::optional<Route> route = options_.cluster->PickReady(key, query->lost_on)) {
    return Send(std::move(query), *std::move(route));
  }
  if (query->waited_for_load && query->retries_left-- <= 0) {
    return Finish(query, absl::UnavailableError(
                             absl::StrCat(key.ToString(), " was loaded but is gone again")));
  }
  query->waited_for_load = true;
  LoadWaiter waiter = [this, query](absl::Status status) mutable {
    OnLoadDone(std::move(query), std::move(status));
  };
  if (options_.placer->EnsureLoaded(*query->variant, waiter, query->lost_on)) {
    return WaitsFor(*query, absl::StrCat("a load of ", key.ToString()));
  }
  if (WorkersOnTheirWay()) {
    query->waited_for_load = false;  // it waits for a worker, not a load
    WaitsFor(*query, "a worker to join");
    return AttemptLater(std::move(query), options_.worker_wait_poll);
  }
  Finish(query, absl::UnavailableError(absl::StrCat("no worker can take ", key.ToString(),
                                                    options_.cluster->worker_count() == 0
                                                        ? ": no workers are registered yet"
                                                        : ": every worker is full")));
}

bool Dispatcher::WorkersOnTheirWay() const {
  return options_.min_workers > 0 &&
         options_.cluster->reachable_worker_count() < static_cast<size_t>(options_.min_workers);
}

void Dispatcher::WaitsFor(Query& query, std::string what) {
  // Noted once the wait is registered: a load done in the meantime could
  // have sent the query already, and this would then misname what it waits
  // for. Loads take a hundred milliseconds, this microseconds, and only the
  // message is at stake.
  absl::MutexLock lock(&query.sent_mu);
  query.sent_variant = nullptr;  // an earlier send failed, or the query would not wait
  query.waited_for = std::move(what);
}

void Dispatcher::AttemptLater(std::shared_ptr<Query> query, Nanos after) {
  deadline_timer_->Schedule(options_.clock->Now() + after,
                            [this, query]() mutable { Attempt(std::move(query)); });
}

void Dispatcher::OnLoadDone(std::shared_ptr<Query> query, absl::Status status) {
  if (status.ok()) return Attempt(std::move(query));
  if (IsWorkerLost(status) && query->retries_left-- > 0) {
    query->waited_for_load = false;  // that load is gone, not loaded and gone again
    // Not from here: a waiter may be told under its caller's lock (the
    // placer's, when the chosen worker left before its load began), which
    // choosing again would take once more.
    return AttemptLater(std::move(query), 0);
  }
  Finish(query, status);
}

void Dispatcher::Send(std::shared_ptr<Query> query, Route route) {
  WorkerApi::InferOptions send;
  send.timeout = query->deadline - options_.clock->Now();
  send.reply_margin = options_.reply_margin;
  send.best_effort = query->best_effort;
  if (!query->best_effort) {
    // A past objective is sent as "now": the worker then runs the query as
    // soon as it can, within the hard deadline.
    send.objective = std::max<Nanos>(
        query->objective - options_.clock->Now() - options_.reply_margin, kMicrosecond);
  }
  const VariantKey key = query->variant->spec.key;
  {
    absl::MutexLock lock(&query->sent_mu);
    query->sent_variant = query->variant;
    query->sent_worker = route.worker_id;
    query->waited_for.clear();
  }
  const Nanos sent_at = options_.clock->Now();
  route.api->Infer(
      key, query->inputs, send,
      [this, query, key, sent_at, worker = route.worker_id, worker_type = route.worker_type,
       generation = route.instance_generation](absl::StatusOr<WorkerReply> reply) mutable {
        if (!reply.ok()) {
          Release(*query, worker, key, /*answered=*/false);
          return OnSendFailed(std::move(query), key, {worker, generation}, reply.status());
        }
        // The round trip's own cost: what neither the worker's queue and
        // compute nor the wait for a call to it explain.
        const Nanos worker_time =
            (reply->queue_us + reply->compute_us) * kMicrosecond + reply->held;
        Release(
            *query, worker, key, /*answered=*/true,
            {std::max<Nanos>(0, options_.clock->Now() - sent_at - worker_time),
             reply->compute_us * kMicrosecond, reply->batch_size});
        if (const std::string* app = AppOf(*query); options_.app_usage != nullptr && app) {
          options_.app_usage->AddCompute(*app, reply->compute_us, reply->batch_size);
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
        // Waiting for a call to the worker is queueing too.
        response.timings.queue_us = reply->queue_us + reply->held / kMicrosecond;
        response.timings.compute_us = reply->compute_us;
        response.timings.batch_size = reply->batch_size;
        Finish(query, std::move(response));
      });
}

void Dispatcher::OnSendFailed(std::shared_ptr<Query> query, const VariantKey& key,
                              const SentTo& sent_to, const absl::Status& status) {
  const std::string& worker = sent_to.worker;
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      // The worker no longer holds the instance (unloaded, or the worker
      // restarted): the policy chooses again. A newer load of the variant
      // there is not the instance the worker spoke of.
      ClusterOf(*query).ForgetInstance(worker, key, sent_to.instance_generation);
      if (query->retries_left-- > 0) return Retry(std::move(query));
      return Finish(query, absl::UnavailableError(status.message()));
    case absl::StatusCode::kUnavailable:
      // The worker could not be reached (it died, or its connection broke):
      // no query goes there until it reports again, and this one never.
      ClusterOf(*query).MarkUnreachable(worker);
      query->lost_on.push_back(worker);
      if (query->retries_left-- > 0) return Retry(std::move(query));
      return Finish(query, absl::UnavailableError(absl::StrCat(
                               key.ToString(), " on ", worker, " could not be reached (",
                               status.message(), "), and the query has no retry left")));
    case absl::StatusCode::kDeadlineExceeded:
      return Finish(query, absl::DeadlineExceededError(absl::StrCat(
                               DeadlinePassed(query->deadline, query->received,
                                              absl::StrCat(key.ToString(), " on ", worker)),
                               " (", status.message(), ")")));
    default:
      return Finish(query, status);
  }
}

void Dispatcher::Finish(std::shared_ptr<Query> query, absl::StatusOr<InferResponse> result) {
  if (query->finished.exchange(true, std::memory_order_acq_rel)) return;
  if (const uint64_t seq = query->deadline_timer_seq.load(std::memory_order_relaxed); seq != 0) {
    deadline_timer_->Cancel({query->deadline, seq});
  }
  if (result.ok()) {
    result->timings.total_us = (options_.clock->Now() - query->received) / kMicrosecond;
  }
  if (options_.service_level != nullptr) {
    const std::string* app = AppOf(*query);
    // An answer is within the objective: past the deadline the query is
    // answered DEADLINE_EXCEEDED instead.
    if (app != nullptr) options_.service_level->Add(*app, result.ok());
  }
  if (options_.metrics != nullptr) {
    const bool expired = result.status().code() == absl::StatusCode::kDeadlineExceeded;
    if (expired) options_.metrics->RecordExpiry(options_.clock->Now() - query->deadline);
    // Only an answer or an expiry says how good the estimate was; a query
    // moved to the pool since (a retry) was judged again there.
    if (query->bouncer_estimate > 0 && !query->in_burst_pool && (result.ok() || expired)) {
      const Nanos answered = result.ok() ? options_.clock->Now()
                                         : std::min(options_.clock->Now(), query->deadline);
      options_.metrics->RecordBouncerEstimate(query->bouncer_estimate,
                                              answered - query->bouncer_at, result.ok());
    }
    // Only registered names become label values.
    options_.metrics->RecordQuery(query->model != nullptr ? query->model->name : "",
                                  query->variant != nullptr ? query->variant->spec.key.variant : "",
                                  result.status(), result.ok() ? &result->timings : nullptr);
  }
  std::move(query->done)(std::move(result));
}

}  // namespace maitre::controller
