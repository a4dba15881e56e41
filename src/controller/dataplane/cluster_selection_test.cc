// The Cluster's selection under load (cluster_selection.cc), with the
// example zoo's fmnist-cnn profiles on the default worker types: the first
// query loads the quickest variant to start; once its instance reports
// Overloaded, the next load is the variant with the most capacity per
// dollar. Each load is counted by the rule that chose it, and the metrics
// export those counts with the autoscaler's as maitre_variant_choices_total.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "controller/dataplane/cluster.h"
#include "controller/serving_metrics.h"
#include "core/clock.h"
#include "metrics/metric_set.h"
#include "policy/selection_index.h"
#include "policy/testing/zoo_profiles.h"

namespace maitre::controller {
namespace {

using ::testing::HasSubstr;

class ClusterSelectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Cluster::Options options;
    options.clock = &clock_;
    options.connect = [](const std::string&, const std::string&) {
      return std::unique_ptr<WorkerApi>();
    };
    cluster_ = std::make_unique<Cluster>(options);
    policy::SelectionCatalogue catalogue;
    catalogue.worker_types = options.types.types();
    policy::ServableApp app{"fashion", {}};
    for (const policy::testing::ZooVariant& z : policy::testing::FmnistCnnVariants()) {
      policy::ServableVariant v;
      v.key = {"fmnist-cnn", z.variant};
      v.accuracy = z.accuracy;
      for (const WorkerType& t : catalogue.worker_types) v.profiles[t.name] = z.profile;
      app.variants.push_back(v);
    }
    catalogue.apps.push_back(app);
    auto index = policy::SelectionIndex::Create(catalogue);
    ASSERT_TRUE(index.ok()) << index.status();
    model_ = index->FindModel("fmnist-cnn");
    cluster_->SetSelectionIndex(std::make_shared<const policy::SelectionIndex>(*std::move(index)),
                                {{"fmnist-cnn", 20}});
    for (const char* type : {"cpu-1", "cpu-2"}) {
      auto id = cluster_->AddWorker(type, std::string("fake:") + type, 0, "");
      ASSERT_TRUE(id.ok()) << id.status();
      workers_.push_back(*id);
    }
  }

  // One query for the model at its 20 ms objective.
  SelectionResult Select() {
    policy::SelectionRequest request;
    request.model = model_;
    request.requirements.latency_ms = 20;
    request.now = clock_.Now();
    request.deadline = request.now + 22 * kMillisecond;
    LoadWaiter waiter = [](absl::Status) {};  // told when a load it waits on ends
    return cluster_->Select(request, waiter);
  }

  ManualClock clock_{kSecond};
  std::unique_ptr<Cluster> cluster_;
  std::vector<std::string> workers_;
  policy::ModelId model_ = policy::kNoId;
};

TEST_F(ClusterSelectionTest, UnderLoadTheNextLoadIsForCapacityAndIsCounted) {
  SelectionResult first = Select();
  ASSERT_TRUE(first.load.has_value());
  EXPECT_EQ(first.load->variant, (VariantKey{"fmnist-cnn", "opencv"}));
  EXPECT_EQ(first.decision.load_rule, policy::LoadRule::kQuickest);
  const std::string worker = first.load->worker_id;
  cluster_->FinishLoad(worker, first.load->variant, absl::OkStatus());

  // It serves past its saturation (12,485 qps at 20 ms): Overloaded.
  WorkerReport report;
  report.worker_id = worker;
  InstanceStats stats;
  stats.replicas = 1;
  stats.arrival_qps = 20000;
  stats.served_qps = 13000;
  stats.mean_batch = 8;
  report.instances.push_back({first.load->variant, stats});
  ASSERT_TRUE(cluster_->ApplyReport(report));

  SelectionResult next = Select();
  ASSERT_TRUE(next.load.has_value());
  EXPECT_EQ(next.load->variant, (VariantKey{"fmnist-cnn", "torch-opt"}));
  EXPECT_EQ(next.decision.load_rule, policy::LoadRule::kCapacity);

  const auto counts = cluster_->SelectionLoadCounts();
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts.at({"fmnist-cnn:opencv", "quickest"}), 1);
  EXPECT_EQ(counts.at({"fmnist-cnn:torch-opt", "capacity"}), 1);

  metrics::MetricSet set;
  auto metrics = ServingMetrics::Create(&set, cluster_.get());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  (*metrics)->RecordVariantChoice("fmnist-cnn:torch-opt", "capacity");
  const std::string text = set.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE maitre_variant_choices_total counter"));
  EXPECT_THAT(text, HasSubstr("maitre_variant_choices_total{by=\"selection\",variant=\"fmnist-"
                              "cnn:opencv\",reason=\"quickest\"} 1"));
  EXPECT_THAT(text, HasSubstr("maitre_variant_choices_total{by=\"selection\",variant=\"fmnist-"
                              "cnn:torch-opt\",reason=\"capacity\"} 1"));
  EXPECT_THAT(text, HasSubstr("maitre_variant_choices_total{by=\"autoscaler\",variant=\"fmnist-"
                              "cnn:torch-opt\",reason=\"capacity\"} 1"));
}

}  // namespace
}  // namespace maitre::controller
