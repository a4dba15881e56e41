// End-to-end: `maitre serve --allocator proteus` on the local fixed cluster
// (two workers, no worker autoscaling), serving model-less queries of the
// zoo by the allocation MILP's plan and its weighted router; and the bad
// inputs around it (an unknown allocator, a latency no variant meets, a
// cluster with no workers).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/valset.h"
#include "runtime/testing/zoo.h"
#include "testing/server_process.h"
#include "testing/wait.h"
#include "testing/zoo_requests.h"

namespace maitre {
namespace {

using nlohmann::json;
using runtime::testing::ScopedTempDir;
using testing::ImageRequest;
using testing::ServerOptions;
using testing::ServerProcess;

// The value of `metric{action="KIND"}` in a Prometheus scrape; 0 if absent.
double Counter(const std::string& scrape, const std::string& metric, const std::string& kind) {
  const std::string prefix = absl::StrCat(metric, "{action=\"", kind, "\"} ");
  size_t at = scrape.find(prefix);
  return at == std::string::npos ? 0 : std::stod(scrape.substr(at + prefix.size()));
}

TEST(AccuracyScalingTest, AnUnknownAllocatorIsRefusedBeforeAnythingStarts) {
  ScopedTempDir data;
  ServerOptions options;
  options.data_dir = data.path();
  options.extra_args = {"--allocator", "proteus-typo"};
  auto server = ServerProcess::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(absl::StrContains(server.status().message(), "unknown allocator")) << server.status();
  EXPECT_TRUE(absl::StrContains(server.status().message(), "proteus")) << server.status();
}

TEST(AccuracyScalingTest, ProteusPlansTheFixedClusterAndServesModelLessQueries) {
  ScopedTempDir dir;
  auto zoo = runtime::testing::LoadZoo();
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  const Valset* valset = *runtime::testing::ZooValset();
  Valset small;
  const std::string valset_path = dir.path() + "/valset.npz";
  ASSERT_TRUE(testing::WriteValsetSlice(*valset, 300, valset_path, &small).ok());

  ServerOptions options;
  options.data_dir = dir.path() + "/data";
  options.extra_args = {"--allocator", "proteus",          "--cluster-autoscaler",
                        "false",       "--profile-sweeps", "1"};
  auto started = ServerProcess::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<ServerProcess> server = *std::move(started);
  // A second app whose default latency objective no variant meets: the
  // plan gives it nothing and plans "fashion" as usual.
  auto tight = server->client().Send("PUT", "/v2/apps/tight", json{{"latency_ms", 0.002}}.dump(),
                                     {{"Content-Type", "application/json"}});
  ASSERT_TRUE(tight.ok() && tight->status == 200) << (tight.ok() ? tight->body : "");
  for (const auto& m : *zoo) {
    if (m.name != "fmnist-logreg" && m.name != "fmnist-mlp") continue;
    auto r = server->Register("fashion", m.name, m.torchscript, m.onnx, valset_path);
    ASSERT_TRUE(r.ok() && r->status / 100 == 2) << (r.ok() ? r->body : r.status().ToString());
    if (m.name != "fmnist-logreg") continue;
    r = server->Register("tight", "tight-logreg", m.torchscript, m.onnx, valset_path);
    ASSERT_TRUE(r.ok() && r->status / 100 == 2) << (r.ok() ? r->body : r.status().ToString());
  }
  for (const std::string app : {"fashion", "tight"}) {
    absl::Status profiled = server->AwaitProfiles(app);
    ASSERT_TRUE(profiled.ok()) << profiled << "\n" << server->Log();
  }

  // The plan is made once the profiles are in; until its loads finish,
  // nothing serves (the weighted router never loads on its own).
  const json parameters{{"latency_ms", 50}};
  int last_status = 0;
  absl::Status planned = testing::WaitOnProgress([&] {
    auto r = server->Post("/v2/apps/fashion/infer", ImageRequest(small, 0, parameters));
    last_status = r.ok() ? r->status : -1;
    return testing::Progress{last_status == 200, absl::StrCat("status ", last_status)};
  });
  ASSERT_TRUE(planned.ok()) << planned << "\n" << server->Log();

  // Every model-less query is served, by the plan's instances only: one
  // variant per worker.
  std::map<std::string, std::set<std::string>> variants_by_worker;
  for (int i = 0; i < 60; ++i) {
    auto r = server->Post("/v2/apps/fashion/infer", ImageRequest(small, i % 300, parameters));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 200) << r->body;
    json answer = json::parse(r->body);
    variants_by_worker[answer["parameters"]["worker"].get<std::string>()].insert(absl::StrCat(
        answer["model_name"].get<std::string>(), ":", answer["model_version"].get<std::string>()));
  }
  for (const auto& [worker, variants] : variants_by_worker) {
    EXPECT_EQ(variants.size(), 1u) << worker;
  }
  auto scrape = server->Get("/metrics");
  ASSERT_TRUE(scrape.ok());
  EXPECT_GE(Counter(scrape->body, "maitre_autoscaler_actions_total", "plan"), 1) << scrape->body;
  EXPECT_GE(Counter(scrape->body, "maitre_autoscaler_actions_total", "load"), 1);
  EXPECT_EQ(Counter(scrape->body, "maitre_autoscaler_actions_total", "plan-failed"), 0);

  // A latency no variant meets, stated by the query or by its app's
  // default, is refused with the closest variant named, and the server goes
  // on serving.
  auto impossible =
      server->Post("/v2/apps/fashion/infer", ImageRequest(small, 0, {{"latency_ms", 0.002}}));
  ASSERT_TRUE(impossible.ok());
  EXPECT_EQ(impossible->status, 422) << impossible->body;
  EXPECT_TRUE(absl::StrContains(impossible->body, "fmnist-")) << impossible->body;
  auto by_default = server->Post("/v2/apps/tight/infer", ImageRequest(small, 0, nullptr));
  ASSERT_TRUE(by_default.ok());
  EXPECT_EQ(by_default->status, 422) << by_default->body;
  EXPECT_TRUE(absl::StrContains(by_default->body, "tight-logreg")) << by_default->body;
  auto after = server->Post("/v2/apps/fashion/infer", ImageRequest(small, 1, parameters));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->status, 200) << after->body;
  ASSERT_TRUE(server->Stop().ok());

  // The same registry on a cluster with no workers: nothing can be
  // planned, queries are refused with a reason, and the server stays up.
  options.workers = "";
  auto empty = ServerProcess::Start(options);
  ASSERT_TRUE(empty.ok()) << empty.status();
  server = *std::move(empty);
  auto unplanned = server->Post("/v2/apps/fashion/infer", ImageRequest(small, 0, parameters));
  ASSERT_TRUE(unplanned.ok());
  EXPECT_EQ(unplanned->status, 503) << unplanned->body;
  EXPECT_TRUE(absl::StrContains(unplanned->body, "worker")) << unplanned->body;
  auto live = server->Get("/v2/health/live");
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->status, 200);
  auto ready = server->Get("/v2/health/ready");  // not ready until a worker joins
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->status, 503) << ready->body;
  auto app = server->GetJson("/v2/apps/fashion");
  ASSERT_TRUE(app.ok()) << app.status();
  EXPECT_TRUE(server->Stop().ok());
}

}  // namespace
}  // namespace maitre
