#include "controller/provision/membership_service.h"

#include "core/secret_token.h"
#include "rpc/convert.h"

namespace maitre::controller {

namespace v1 = ::maitre::worker::v1;
namespace {

// The bearer token the caller sent ("" when none).
std::string PresentedToken(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthorizationHeader);
  if (it == metadata.end()) return "";
  return std::string(BearerToken(absl::string_view(it->second.data(), it->second.size())));
}

}  // namespace

MembershipService::MembershipService(Options options) : options_(std::move(options)) {
  // A removed worker's session ends with it: its next report is told so,
  // and it joins again with the join token.
  for (Cluster* cluster : {options_.cluster, options_.burst_cluster}) {
    if (cluster == nullptr) continue;
    cluster->OnWorkerRemoved([this](const WorkerView& w) {
      absl::MutexLock lock(&mu_);
      sessions_.erase(w.id);
    });
  }
}

std::optional<MembershipService::Session> MembershipService::SessionOf(
    const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end()) return std::nullopt;
  return it->second;
}

grpc::Status MembershipService::CheckSession(const grpc::ServerContext& context,
                                             const std::optional<Session>& session) {
  if (!session.has_value() || !TokensMatch(PresentedToken(context), session->token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the call does not carry the session token of the worker it names");
  }
  return grpc::Status::OK;
}

grpc::Status MembershipService::RegisterWorker(grpc::ServerContext* context,
                                             const v1::RegisterWorkerRequest* request,
                                             v1::RegisterWorkerResponse* response) {
  if (!TokensMatch(PresentedToken(*context), options_.join_token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the worker's join token is missing or wrong (maitre worker "
                        "--join-token-file; docs/operations.md, \"Security\")");
  }
  if (request->call_token().size() < 16) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a worker must send the call token its service accepts");
  }
  const std::string session = RandomToken();
  Cluster* cluster = options_.burst_cluster != nullptr &&
                             options_.burst_cluster->types().Find(request->worker_type()) != nullptr
                         ? options_.burst_cluster
                         : options_.cluster;
  absl::StatusOr<std::string> id;
  {
    // The session exists before the worker is seen: a load can be sent to
    // it, and its blob fetch arrive here, the moment AddWorker returns.
    // (The cluster runs its removal callbacks, which take mu_, outside its
    // own lock, so this order cannot deadlock.)
    absl::MutexLock lock(&mu_);
    id = cluster->AddWorker(request->worker_type(), request->address(), request->pid(),
                            request->launch_token(), request->call_token());
    if (id.ok()) sessions_[*id] = {session, cluster};
  }
  if (!id.ok()) return rpc::ToGrpc(id.status());
  const WorkerType* type = cluster->types().Find(request->worker_type());
  response->set_worker_id(*id);
  response->set_report_interval_ms(ToMillis(options_.report_interval));
  response->set_cores(type->cores);
  response->set_memory_mb(type->memory_mb);
  response->set_batching_policy(options_.batching_policy);
  response->set_session_token(session);
  if (options_.on_join) options_.on_join(*id, request->launch_token());
  return grpc::Status::OK;
}

grpc::Status MembershipService::Report(grpc::ServerContext* context,
                                     const v1::ReportRequest* request,
                                     v1::ReportResponse* response) {
  const std::optional<Session> session = SessionOf(request->worker_id());
  // A worker this controller never admitted (it restarted since) is told
  // so, and joins again with the join token.
  if (!session.has_value()) {
    response->set_known(false);
    return grpc::Status::OK;
  }
  if (grpc::Status s = CheckSession(*context, session); !s.ok()) return s;
  WorkerReport report;
  report.worker_id = request->worker_id();
  report.cpu_utilisation = request->cpu_utilisation();
  report.memory_mb = request->memory_mb();
  for (const v1::InstanceReport& r : request->instances()) {
    InstanceStats stats;
    stats.replicas = r.replicas();
    stats.queue_length = r.queue_length();
    stats.arrival_qps = r.arrival_qps();
    stats.served_qps = r.served_qps();
    stats.latency_p50_ms = r.latency_p50_ms();
    stats.latency_p99_ms = r.latency_p99_ms();
    stats.compute_p50_ms = r.compute_p50_ms();
    stats.mean_batch = r.mean_batch();
    stats.max_batch = r.max_batch();
    stats.dropped = r.dropped();
    stats.dropped_qps = r.dropped_qps();
    report.instances.push_back({VariantKey{r.model(), r.variant()}, stats});
  }
  response->set_known(session->cluster->ApplyReport(report));
  return grpc::Status::OK;
}

grpc::Status MembershipService::FetchBlob(grpc::ServerContext* context,
                                        const v1::FetchBlobRequest* request,
                                        grpc::ServerWriter<v1::BlobChunk>* writer) {
  if (grpc::Status s = CheckSession(*context, SessionOf(request->worker_id())); !s.ok()) {
    return s;
  }
  auto bytes = options_.blobs->Read(request->blob());
  if (!bytes.ok()) return rpc::ToGrpc(bytes.status());
  // 1 MiB chunks stay well under gRPC's default message limit.
  constexpr size_t kChunk = 1 << 20;
  size_t offset = 0;
  do {
    v1::BlobChunk chunk;
    if (offset == 0) chunk.set_total_size(static_cast<int64_t>(bytes->size()));
    chunk.set_data(bytes->substr(offset, kChunk));
    if (!writer->Write(chunk)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the worker stopped reading");
    }
    offset += kChunk;
  } while (offset < bytes->size());
  return grpc::Status::OK;
}

}  // namespace maitre::controller
