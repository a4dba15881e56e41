#include "worker/controller_link.h"

#include <unistd.h>

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/secret_token.h"
#include "core/sha256.h"
#include "rpc/convert.h"
#include "core/logging.h"

namespace maitre::worker {
namespace {

void SetTimeout(grpc::ClientContext* context, Nanos timeout) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::nanoseconds(timeout));
}

}  // namespace

ControllerLink::ControllerLink(Options options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  stub_ = v1::Membership::NewStub(grpc::CreateCustomChannel(
      options_.controller, grpc::InsecureChannelCredentials(), args));
}

absl::StatusOr<Registration> ControllerLink::Register(const std::string& address,
                                                      Nanos timeout,
                                                      const StopSignal* stop) {
  Nanos give_up = options_.clock->Now() + timeout;
  Nanos backoff = 50 * kMillisecond;
  absl::Status last;
  while (options_.clock->Now() < give_up) {
    v1::RegisterWorkerRequest request;
    request.set_worker_type(options_.worker_type);
    request.set_address(address);
    request.set_pid(static_cast<int32_t>(getpid()));
    request.set_launch_token(options_.launch_token);
    request.set_call_token(options_.call_token);
    v1::RegisterWorkerResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, 2 * kSecond);
    context.AddMetadata(kAuthorizationHeader, BearerValue(options_.join_token));
    last = rpc::FromGrpc(stub_->RegisterWorker(&context, request, &response));
    if (last.ok()) {
      Registration r;
      r.worker_id = response.worker_id();
      if (response.report_interval_ms() > 0) {
        r.report_interval = FromMillis(response.report_interval_ms());
      }
      r.cores = std::max(1, response.cores());
      r.memory_mb = response.memory_mb();
      r.batching_policy = response.batching_policy();
      absl::MutexLock lock(&mu_);
      worker_id_ = r.worker_id;
      session_token_ = response.session_token();
      return r;
    }
    // A refusal (unknown type, a wrong join token) will not change by
    // retrying.
    if (last.code() == absl::StatusCode::kInvalidArgument ||
        last.code() == absl::StatusCode::kUnauthenticated) {
      return last;
    }
    if (options_.clock->SleepUntil(options_.clock->Now() + backoff, stop)) break;
    backoff = std::min<Nanos>(backoff * 2, kSecond);
  }
  return absl::UnavailableError(
      absl::StrCat("could not register with the controller at ", options_.controller, ": ",
                   last.message()));
}

std::string ControllerLink::Authenticate(grpc::ClientContext* context, Nanos timeout) {
  SetTimeout(context, timeout);
  absl::MutexLock lock(&mu_);
  context->AddMetadata(kAuthorizationHeader, BearerValue(session_token_));
  return worker_id_;
}

absl::Status ControllerLink::Report(InstanceManager& manager, double cpu_utilisation,
                                    double memory_mb) {
  v1::ReportRequest request;
  grpc::ClientContext context;
  request.set_worker_id(Authenticate(&context, 2 * kSecond));
  request.set_cpu_utilisation(cpu_utilisation);
  request.set_memory_mb(memory_mb);
  for (const InstanceReport& r : manager.TakeReports()) {
    v1::InstanceReport* out = request.add_instances();
    out->set_model(r.key.model);
    out->set_variant(r.key.variant);
    out->set_replicas(r.replicas);
    out->set_queue_length(r.queue_length);
    double seconds = std::max(1e-9, ToSeconds(r.interval.length));
    out->set_arrival_qps(r.interval.arrivals / seconds);
    out->set_served_qps(r.interval.served / seconds);
    out->set_latency_p50_ms(r.interval.latency_p50_ms);
    out->set_latency_p99_ms(r.interval.latency_p99_ms);
    out->set_compute_p50_ms(r.interval.compute_p50_ms);
    out->set_mean_batch(r.interval.mean_batch_rows);
    out->set_dropped(r.interval.dropped);
    out->set_dropped_qps(r.interval.dropped / seconds);
    out->set_max_batch(r.max_batch);
  }
  v1::ReportResponse response;
  absl::Status status = rpc::FromGrpc(stub_->Report(&context, request, &response));
  if (!status.ok()) return status;
  if (!response.known()) return absl::NotFoundError("the controller does not know this worker");
  return absl::OkStatus();
}

absl::Status ControllerLink::Fetch(const std::string& hash, const std::string& path) {
  // The controller may send this worker its first load as soon as it admits
  // it, before the answer to the registration (with the session token) is
  // read here: the fetch waits for that answer instead of going out without
  // a session and being refused.
  {
    absl::MutexLock lock(&mu_);
    const bool registered = mu_.AwaitWithTimeout(
        absl::Condition(+[](std::string* token) { return !token->empty(); }, &session_token_),
        kRegistrationWait);
    if (!registered) {
      return absl::UnavailableError(
          absl::StrCat("fetching blob ", hash, ": this worker has no session with the "
                       "controller yet"));
    }
  }
  v1::FetchBlobRequest request;
  request.set_blob(hash);
  grpc::ClientContext context;
  request.set_worker_id(Authenticate(&context, 300 * kSecond));
  auto reader = stub_->FetchBlob(&context, request);
  std::string data;
  v1::BlobChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.total_size() > 0 && data.empty()) data.reserve(chunk.total_size());
    data.append(chunk.data());
  }
  absl::Status status = rpc::FromGrpc(reader->Finish());
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("fetching blob ", hash, ": ", status.message()));
  }
  if (Sha256Hex(data) != hash) {
    return absl::DataLossError(absl::StrCat("blob ", hash, " arrived corrupted"));
  }
  spdlog::debug("fetched blob {} ({} bytes)", hash, data.size());
  return WriteFileAtomically(path, data);
}

}  // namespace maitre::worker
