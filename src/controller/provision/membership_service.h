// The controller's side of maitre.worker.v1.Membership: workers join, report,
// and fetch model files here. It is control-path traffic, so it uses gRPC's
// synchronous API.
//
// Every call is authenticated (docs/operations.md, "Security"): a worker
// joins with the cluster's join token and is given a session token of its
// own, which its reports and blob fetches must carry; so nobody without the
// join token can join, report as a worker or read a model file, and no
// worker can report as another.
//
// Workers of the burst pool's type join the pool's own cluster (its ids
// start "b"), so that nothing but the pool routes to them
// (docs/architecture.md, "The burst pool").
//
// Thread-safety: thread-safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "controller/dataplane/cluster.h"
#include "controller/registry/blob_store.h"
#include "maitre/worker.grpc.pb.h"

namespace maitre::controller {

class MembershipService final : public ::maitre::worker::v1::Membership::Service {
 public:
  struct Options {
    Cluster* cluster = nullptr;
    // Where workers of `burst_cluster`'s one type join; may be null.
    Cluster* burst_cluster = nullptr;
    registry::BlobStore* blobs = nullptr;
    Nanos report_interval = 500 * kMillisecond;
    std::string batching_policy;
    // The secret a worker must present to join (core/secret_token.h).
    std::string join_token;
    // Told when a worker joins (the local provider matches launch tokens).
    std::function<void(const std::string& worker_id, const std::string& launch_token)> on_join;
  };
  // Outlived by the clusters, which it asks to tell it of removed workers.
  explicit MembershipService(Options options);

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const worker::v1::RegisterWorkerRequest* request,
                              worker::v1::RegisterWorkerResponse* response) override;
  grpc::Status Report(grpc::ServerContext* context, const worker::v1::ReportRequest* request,
                      worker::v1::ReportResponse* response) override;
  grpc::Status FetchBlob(grpc::ServerContext* context,
                         const worker::v1::FetchBlobRequest* request,
                         grpc::ServerWriter<worker::v1::BlobChunk>* writer) override;

 private:
  struct Session {
    std::string token;
    Cluster* cluster = nullptr;  // the one it joined
  };
  // The session `worker_id` was given when it joined, if any.
  std::optional<Session> SessionOf(const std::string& worker_id);
  // OK when the call carries `session` (none: refused).
  grpc::Status CheckSession(const grpc::ServerContext& context,
                            const std::optional<Session>& session);

  const Options options_;
  absl::Mutex mu_;
  std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);  // by worker id
};

}  // namespace maitre::controller
