// The controller's side of maitre.worker.v1.Membership: workers join, report,
// and fetch model files here. It is control-path traffic, so it uses gRPC's
// synchronous API.
//
// Thread-safety: thread-safe.
#pragma once

#include <functional>
#include <string>

#include "controller/dataplane/cluster.h"
#include "controller/registry/blob_store.h"
#include "maitre/worker.grpc.pb.h"

namespace maitre::controller {

class MembershipService final : public ::maitre::worker::v1::Membership::Service {
 public:
  struct Options {
    Cluster* cluster = nullptr;
    registry::BlobStore* blobs = nullptr;
    Nanos report_interval = 500 * kMillisecond;
    std::string batching_policy;
    // Told when a worker joins (the local provider matches launch tokens).
    std::function<void(const std::string& worker_id, const std::string& launch_token)> on_join;
  };
  explicit MembershipService(Options options) : options_(std::move(options)) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const worker::v1::RegisterWorkerRequest* request,
                              worker::v1::RegisterWorkerResponse* response) override;
  grpc::Status Report(grpc::ServerContext* context, const worker::v1::ReportRequest* request,
                      worker::v1::ReportResponse* response) override;
  grpc::Status FetchBlob(grpc::ServerContext* context,
                         const worker::v1::FetchBlobRequest* request,
                         grpc::ServerWriter<worker::v1::BlobChunk>* writer) override;

 private:
  const Options options_;
};

}  // namespace maitre::controller
