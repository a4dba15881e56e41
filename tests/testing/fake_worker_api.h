// A WorkerApi for tests without worker processes: every call answers
// UNIMPLEMENTED unless a test overrides it (usually Load and Unload).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "controller/dataplane/worker_api.h"

namespace maitre::testing {

class FakeWorkerApi : public controller::WorkerApi {
 public:
  void Infer(const VariantKey&, std::shared_ptr<const std::vector<Tensor>>, const InferOptions&,
             controller::WorkerReplyCallback done) override {
    std::move(done)(absl::UnimplementedError("no data path here"));
  }
  absl::StatusOr<controller::LoadResult> Load(const VariantSpec&, int,
                                              const std::vector<LatencyPoint>&, int32_t) override {
    return absl::UnimplementedError("no loading here");
  }
  absl::Status Unload(const VariantKey&) override {
    return absl::UnimplementedError("no unloading here");
  }
  absl::StatusOr<Profile> ProfileVariant(const VariantSpec&,
                                         const controller::ProfileRequest&) override {
    return absl::UnimplementedError("no profiling here");
  }
  absl::StatusOr<controller::Evaluation> Evaluate(const VariantSpec&, const std::string&,
                                                  int) override {
    return absl::UnimplementedError("no evaluation here");
  }
  absl::StatusOr<std::vector<Tensor>> RunOnce(const VariantSpec&,
                                              const std::vector<Tensor>&) override {
    return absl::UnimplementedError("no runs here");
  }
};

}  // namespace maitre::testing
