// What the dispatcher's tests share: a registry and catalog holding one app
// ("a") with one model and its one variant, profiled on worker type "small",
// and a cluster of that type whose selection index is built from it; and a
// base for stand-in workers that serve and load but do no control work.
//
// Thread-safety: test set-up; call from the test's thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "controller/dataplane/cluster.h"
#include "controller/dataplane/selection_catalogue.h"
#include "controller/models/catalog.h"
#include "controller/registry/registry.h"
#include "controller/registry/registry_test_util.h"

namespace maitre::controller::testing {

// A stand-in worker that loads at once (one replica, 10 MB) and unloads;
// its tests never profile, evaluate or run a model once. Subclasses answer
// Infer.
class ServingOnlyApi : public WorkerApi {
 public:
  absl::StatusOr<LoadResult> Load(const VariantSpec&, int,
                                  const std::vector<LatencyPoint>&, int32_t) override {
    return LoadResult{1, 10};
  }
  absl::Status Unload(const VariantKey&) override { return absl::OkStatus(); }
  absl::StatusOr<Profile> ProfileVariant(const VariantSpec&, const ProfileRequest&) override {
    return absl::UnimplementedError("no profiling here");
  }
  absl::StatusOr<Evaluation> Evaluate(const VariantSpec&, const std::string&, int) override {
    return absl::UnimplementedError("no evaluation here");
  }
  absl::StatusOr<std::vector<Tensor>> RunOnce(const VariantSpec&,
                                              const std::vector<Tensor>&) override {
    return absl::UnimplementedError("no single runs here");
  }
};

struct OneVariant {
  std::unique_ptr<registry::Registry> registry;
  Catalog catalog;
  std::unique_ptr<Cluster> cluster;
};

// Fills `out` for `key` with `profile` (on "small"); each worker's WorkerApi
// comes from `connect`.
inline absl::Status SetUpOneVariant(
    const std::string& db_path, const VariantKey& key, Profile profile,
    std::function<std::unique_ptr<WorkerApi>(const std::string&, const std::string&)> connect,
    OneVariant& out) {
  namespace util = registry::test_util;
  auto registry = registry::Registry::Open({db_path});
  if (!registry.ok()) return registry.status();
  out.registry = *std::move(registry);
  if (absl::Status s = out.registry->PutApp({"a", {}}); !s.ok()) return s;
  if (absl::Status s = out.registry->RegisterModel(
          util::MakeModel("a", key.model, "m"),
          {util::MakeVariant(key.model, key.variant, Runtime::kOpenCv)});
      !s.ok()) {
    return s;
  }
  registry::ProfileRecord record = util::MakeProfile(key.model, key.variant, "small");
  record.profile = std::move(profile);
  if (absl::Status s = out.registry->PutProfile(record); !s.ok()) return s;
  if (absl::Status s = out.catalog.Reload(*out.registry); !s.ok()) return s;
  Cluster::Options cluster;
  cluster.types = WorkerTypeTable({{"small", 1, 4096, 0.1}});
  cluster.connect = std::move(connect);
  out.cluster = std::make_unique<Cluster>(cluster);
  auto index = BuildSelectionIndex(*out.catalog.Get(), cluster.types, nullptr);
  if (!index.ok()) return index.status();
  out.cluster->SetSelectionIndex(
      std::make_shared<const policy::SelectionIndex>(*std::move(index)),
      ModelSloMs(*out.catalog.Get()));
  return absl::OkStatus();
}

}  // namespace maitre::controller::testing
