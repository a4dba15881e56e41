#include "sim/experiment_config.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/file_util.h"

namespace maitre::sim {
namespace {

constexpr char kValid[] = R"(
name: small
cluster:
  worker_types:
    - {name: cpu-1, cores: 1, memory_mb: 4096, price_per_hour: 0.036}
    - {name: cpu-2, cores: 2, memory_mb: 8192, price_per_hour: 0.072}
  workers: {cpu-1: 2, cpu-2: 1}
profiles:
  - model: cnn
    variant: torch
    worker_type: cpu-1
    accuracy: 0.76
    points: [[1, 6, 6.6], [8, 20, 22]]
  - model: cnn
    variant: torch
    worker_type: cpu-2
    accuracy: 0.76
    points: [[1, 4, 4.4], [8, 12, 13]]
apps:
  - name: classify
    latency_ms: 40
    min_accuracy: 0.7
    max_accuracy_drop: 0.05
    share: 3
    instances:
      - {variant: "cnn:torch", worker_type: cpu-1, count: 2}
  - name: other
    latency_ms: 100
    instances:
      - {variant: "cnn:torch", worker_type: cpu-2}
trace:
  generator: gamma
  rate_qps: 300
  shape: 0.25
  duration_s: 30
  seed: 9
policies:
  batching: {name: nexus, max_batch: 16, max_queue_delay_ms: 3}
  routing: least-queued
simulation:
  service_noise: lognormal
)";

TEST(ExperimentConfigTest, ParsesAFullExperiment) {
  auto e = ParseExperiment(kValid, "/nonexistent");
  ASSERT_TRUE(e.ok()) << e.status();
  const SimulationSetup& s = e->setup;
  EXPECT_EQ(e->name, "small");
  ASSERT_EQ(s.worker_types.size(), 2u);
  EXPECT_EQ(s.worker_types[0].count, 2);
  EXPECT_EQ(s.worker_types[1].count, 1);
  ASSERT_EQ(s.variants.size(), 2u);
  EXPECT_EQ(s.variants[1].worker_type, 1);
  ASSERT_EQ(s.apps.size(), 2u);
  EXPECT_EQ(s.apps[0].latency, 40 * kMillisecond);
  EXPECT_DOUBLE_EQ(s.apps[0].min_accuracy, 0.7);
  EXPECT_EQ(s.apps[0].max_accuracy_drop, 0.05);
  EXPECT_FALSE(s.apps[1].max_accuracy_drop.has_value());  // absent: unset
  ASSERT_EQ(s.instances.size(), 3u);
  EXPECT_EQ(s.instances[2].app, 1);
  EXPECT_EQ(s.instances[2].variant, 1);
  EXPECT_EQ(e->generator.kind, GeneratorKind::kGamma);
  EXPECT_DOUBLE_EQ(e->generator.cv, 2.0);
  EXPECT_EQ(e->generator.app_shares, (std::vector<double>{3, 1}));
  EXPECT_EQ(s.horizon, 30 * kSecond);
  EXPECT_EQ(s.seed, 9u);
  EXPECT_EQ(s.batching.policy, "nexus");
  EXPECT_EQ(s.batching.max_batch, 16);
  EXPECT_EQ(s.batching.max_queue_delay, 3 * kMillisecond);
  EXPECT_TRUE(s.service_noise);
  EXPECT_TRUE(e->MakeArrivals().ok());
}

// Replaces the first occurrence of `from` in kValid.
std::string With(const std::string& from, const std::string& to) {
  std::string text = kValid;
  size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

struct BadCase {
  std::string yaml;
  std::string mentions;  // the key the error must name
};

TEST(ExperimentConfigTest, ErrorsNameTheKey) {
  const std::vector<BadCase> cases = {
      {With("latency_ms: 40", "latency_ms: fast"), "apps[0].latency_ms"},
      {With("latency_ms: 40", "latency: 40"), "apps[0].latency"},
      {With("generator: gamma", "generator: bursty"), "trace.generator"},
      {With("rate_qps: 300", "rate_qps: -3"), "trace"},
      {With("cpu-1: 2, cpu-2: 1", "cpu-1: 1, cpu-2: 1"), "cluster.workers.cpu-1"},
      {With("variant: \"cnn:torch\", worker_type: cpu-1",
            "variant: \"cnn:onnx\", worker_type: cpu-1"),
       "apps[0].instances[0].variant"},
      {With("name: nexus", "name: fifo"), "policies.batching"},
      {With("routing: least-queued", "routing: random"), "policies.routing"},
      {With("service_noise: lognormal", "service_noise: gaussian"), "simulation.service_noise"},
      {With("points: [[1, 6, 6.6], [8, 20, 22]]", "points: [[1, 6]]"), "profiles[0].points[0]"},
      {With("points: [[1, 6, 6.6], [8, 20, 22]]", "points: [[1, 6, 5]]"), "profiles[0].points"},
      {With("worker_type: cpu-1\n    accuracy", "worker_type: gpu\n    accuracy"), "profiles[0]"},
      {With("  duration_s: 30\n", ""), "trace.duration_s"},
      {With("generator: gamma", "file: trace.csv\n  generator: gamma"), "trace"},
      {With("name: other", "name: classify"), "apps[1].name"},
      {With("max_accuracy_drop: 0.05", "max_accuracy_drop: 1.5"), "apps[0].max_accuracy_drop"},
      {With("max_accuracy_drop: 0.05", "max_accuracy_drop: -0.1"), "apps[0].max_accuracy_drop"},
      {With("max_accuracy_drop: 0.05", "max_accuracy_drop: most"), "apps[0].max_accuracy_drop"},
      {With("cores: 1,", "cores: 0,"), "cluster.worker_types[0]"},
      {With("max_accuracy_drop: 0.05", "max_accuracy_drop: 0.05\n    rows_per_query: 0"),
       "apps[0].rows_per_query"},
      {With("service_noise: lognormal",
            "service_noise: lognormal\n  jobs: [{app: classify, rows: 10}]"),
       "simulation.jobs: needs routing: selection"},
      {With("service_noise: lognormal",
            "service_noise: lognormal\n  jobs: [{app: nobody, rows: 10}]"),
       "simulation.jobs[0].app"},
      {With("service_noise: lognormal",
            "service_noise: lognormal\n  jobs: [{app: classify, rows: 0}]"),
       "simulation.jobs[0].rows"},
      {With("service_noise: lognormal",
            "service_noise: lognormal\n  interference: {slowdown_at_full: 0.5}"),
       "simulation.interference.slowdown_at_full"},
      {"apps: [", "line"},
      {"", "empty"},
  };
  for (const BadCase& c : cases) {
    auto e = ParseExperiment(c.yaml, "/nonexistent");
    ASSERT_FALSE(e.ok()) << "expected an error naming " << c.mentions;
    EXPECT_NE(e.status().message().find(c.mentions), std::string::npos)
        << "error \"" << e.status().message() << "\" should name " << c.mentions;
  }
}

TEST(ExperimentConfigTest, ReadsProfileCsvAndTraceFilesBesideTheYaml) {
  std::string dir = ::testing::TempDir() + "/maitre_experiment_config_test";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(
      WriteFileAtomically(
          dir + "/profile.csv",
          "model,variant,worker_type,batch,latency_p50_ms,latency_p99_ms,load_ms,memory_mb,"
          "accuracy\ncnn,torch,cpu-1,1,6,6.6,100,50,0.7\ncnn,torch,cpu-1,8,20,22,100,50,0.7\n")
          .ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/trace.csv", "arrival_ms,app\n0,a\n5,a\n2500,a\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/exp.yaml", R"(
profiles:
  - csv: profile.csv
apps:
  - name: a
    latency_ms: 50
    instances: [{variant: "cnn:torch"}]
trace:
  file: trace.csv
)")
                  .ok());
  auto e = LoadExperimentFile(dir + "/exp.yaml");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->trace_from_file);
  EXPECT_EQ(e->trace_rows.size(), 3u);
  EXPECT_EQ(e->setup.horizon, 2500 * kMillisecond + 1);
  ASSERT_EQ(e->setup.variants.size(), 1u);
  EXPECT_DOUBLE_EQ(e->setup.variants[0].accuracy, 0.7);
  // Default cluster: the embedded worker types, one worker per instance.
  EXPECT_EQ(e->setup.worker_types[0].type.name, "cpu-1");
  EXPECT_EQ(e->setup.worker_types[0].count, 1);
  EXPECT_EQ(e->setup.batching.policy, "proteus");

  auto missing = LoadExperimentFile(dir + "/nope.yaml");
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace maitre::sim

namespace maitre::sim {
namespace {

constexpr char kManaged[] = R"(
name: managed
cluster:
  worker_types:
    - {name: cpu, cores: 4, memory_mb: 8192, price_per_hour: 0.2, launch_s: 40, max_workers: 3}
    - {name: gpu, cores: 8, memory_mb: 16384, price_per_hour: 3}
  workers: {cpu: 1}
  replica_cores:
    - {variant: "cnn:trt", worker_type: gpu, cores: 2}
profiles:
  - {model: cnn, variant: cpu, worker_type: cpu, accuracy: 0.76, load_ms: 800,
     points: [[1, 30, 33]]}
  - {model: cnn, variant: trt, worker_type: gpu, accuracy: 0.76, load_ms: 4000,
     points: [[1, 3, 3.3], [8, 10, 11]]}
apps:
  - name: a
    latency_ms: 150
    models: [cnn]
trace:
  generator: poisson
  rate_qps: 10
  duration_s: 10
policies:
  batching: nexus
  routing: selection
  selection: {router: infaas, loads: true, allow_degraded: false}
  allocator: {name: infaas, min_instance_age_s: 10, observed_capacity_memory_s: 5,
              spread_memory_s: 600}
  model_autoscaler: {name: horizontal, lambda_per_s: 0.2, min_scale_down_wait_s: 5,
                     min_consolidation_wait_s: 45, interval_s: 2}
  cluster_autoscaler: {name: on, idle_cooldown_s: 30, min_workers: 2, interval_s: 4}
  report_interval_s: 0.5
)";

TEST(ExperimentConfigManagedTest, ParsesTheControlPlane) {
  auto e = ParseExperiment(kManaged, ".");
  ASSERT_TRUE(e.ok()) << e.status();
  const SimulationSetup& s = e->setup;
  EXPECT_EQ(s.routing, "selection");
  EXPECT_TRUE(s.instances.empty());
  ASSERT_EQ(s.apps.size(), 1u);
  EXPECT_EQ(s.apps[0].models, std::vector<std::string>{"cnn"});
  EXPECT_EQ(s.worker_types[0].launch_delay, 40 * kSecond);
  EXPECT_EQ(s.worker_types[0].max_workers, 3);
  EXPECT_EQ(s.worker_types[1].max_workers, 8);
  EXPECT_EQ(s.worker_types[0].count, 1);
  EXPECT_EQ(s.variants[0].cores_per_replica, 1);
  EXPECT_EQ(s.variants[1].cores_per_replica, 2);
  const ControlSetup& c = s.control;
  EXPECT_TRUE(c.selection_loads);
  EXPECT_FALSE(c.selection.allow_degraded);
  EXPECT_EQ(c.router, "infaas");
  EXPECT_EQ(c.allocator, "infaas");
  EXPECT_EQ(c.min_instance_age, 10 * kSecond);
  EXPECT_EQ(c.observed_capacity_memory, 5 * kSecond);
  EXPECT_EQ(c.consolidation.spread_memory, 600 * kSecond);
  EXPECT_EQ(c.model_autoscaling, ModelAutoscaling::kHorizontal);
  EXPECT_EQ(c.model_autoscaler.lambda_per_s, 0.2);
  EXPECT_EQ(c.model_autoscaler.min_scale_down_wait, 5 * kSecond);
  EXPECT_EQ(c.model_autoscaler.min_consolidation_wait, 45 * kSecond);
  EXPECT_EQ(c.model_interval, 2 * kSecond);
  EXPECT_TRUE(c.cluster_autoscaling);
  EXPECT_EQ(c.cluster_autoscaler.idle_cooldown, 30 * kSecond);
  EXPECT_EQ(c.cluster_autoscaler.min_workers, 2);
  EXPECT_EQ(c.cluster_interval, 4 * kSecond);
  EXPECT_EQ(c.report_interval, kSecond / 2);
}

TEST(ExperimentConfigManagedTest, ErrorsNameTheKey) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string text = kManaged;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  std::vector<std::pair<std::string, std::string>> cases = {
      {with("name: horizontal", "name: vertical"), "policies.model_autoscaler"},
      {with("name: on, idle", "name: maybe, idle"), "policies.cluster_autoscaler"},
      {with("routing: selection", "routing: least-queued"), "policies.selection"},
      {with("cores: 2}", "cores: 9}"), "cluster.replica_cores[0].cores"},
      {with("variant: \"cnn:trt\", worker_type: gpu, cores",
            "variant: \"cnn:trt\", worker_type: cpu, cores"),
       "cluster.replica_cores[0]"},
      {with("models: [cnn]", "models: [rnn]"), "apps[0].models[0]"},
      {with("loads: true", "loads: maybe"), "policies.selection.loads"},
      {with("router: infaas", "router: nope"), "policies.selection.router"},
      {with("{name: infaas, min_instance_age_s", "{name: nope, min_instance_age_s"),
       "policies.allocator"},
      {with("min_instance_age_s: 10", "min_instance_age_s: -1"),
       "policies.allocator.min_instance_age_s"},
      {with("{name: infaas, min_instance_age_s: 10, observed_capacity_memory_s: 5,\n"
            "              spread_memory_s: 600}",
            "{name: proteus, min_slowdown: 0}"),
       "policies.allocator.min_slowdown"},
      {with("spread_memory_s: 600", "spread_memory_s: -1"),
       "policies.allocator.spread_memory_s"},
      {with("launch_s: 40", "launch_s: -1"), "cluster.worker_types[0]"},
      {with("report_interval_s: 0.5", "report_interval_s: 0"), "policies.report_interval_s"},
      {with("min_workers: 2", "min_workers: -2"), "policies.cluster_autoscaler.min_workers"},
  };
  // Without the selection key, an autoscaler still needs routing: selection.
  std::string text = with("  selection: {router: infaas, loads: true, allow_degraded: false}\n", "");
  text = text.replace(text.find("  allocator: {"), text.find("  model_autoscaler:") - text.find("  allocator: {"), "");
  text.replace(text.find("routing: selection"), 18, "routing: least-queued");
  cases.push_back({text, "policies.model_autoscaler"});
  // A static cluster serves an app only through instances it lists.
  text.replace(text.find("model_autoscaler: {name: horizontal"), 35,
               "model_autoscaler: {name: off");
  text.replace(text.find("name: on, idle"), 8, "name: off");
  cases.push_back({text, "apps[0].instances"});
  for (const auto& [yaml, mentions] : cases) {
    auto e = ParseExperiment(yaml, ".");
    ASSERT_FALSE(e.ok()) << "expected an error naming " << mentions;
    EXPECT_NE(e.status().message().find(mentions), std::string::npos)
        << "error \"" << e.status().message() << "\" should name " << mentions;
  }
}

TEST(ExperimentConfigManagedTest, ParsesTheMarkAllocatorBillingBlocksAndTheBurstPool) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string text = kManaged;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const std::string allocator =
      "{name: infaas, min_instance_age_s: 10, observed_capacity_memory_s: 5,\n"
      "              spread_memory_s: 600}";
  std::string text = with(allocator,
                          "{name: mark, predictor: oracle, unit_s: 2, horizon_units: 3, "
                          "sample_s: 1, headroom: 1.5, cool_down_s: 30, release_margin_s: 4}");
  text.replace(text.find("launch_s: 40,"), 13, "launch_s: 40, billing_s: 3600,");
  auto e = ParseExperiment(text, ".");
  ASSERT_TRUE(e.ok()) << e.status();
  const ControlSetup& c = e->setup.control;
  EXPECT_EQ(c.allocator, "mark");
  EXPECT_EQ(c.router, "infaas");  // the experiment names one
  EXPECT_EQ(e->setup.worker_types[0].type.billing_unit, 3600 * kSecond);
  EXPECT_EQ(e->setup.worker_types[1].type.billing_unit, 0);
  EXPECT_EQ(c.mark.predictor, "oracle");
  EXPECT_EQ(c.mark.windows.unit, 2 * kSecond);
  EXPECT_EQ(c.mark.windows.horizon, 3);
  EXPECT_EQ(c.mark.windows.sample, kSecond);
  EXPECT_EQ(c.mark.headroom, 1.5);
  EXPECT_EQ(c.mark.cool_down, 30 * kSecond);
  EXPECT_EQ(c.mark.release_margin, 4 * kSecond);
  // The oracle's series is this trace's: 10 s of 10 qps from the first
  // model round (2 s), in 2 s units.
  ASSERT_EQ(c.mark.known_peaks.count("a"), 1u);
  EXPECT_EQ(c.mark.known_peaks.at("a").size(), 4u);
  double most = 0;
  for (double peak : c.mark.known_peaks.at("a")) most = std::max(most, peak);
  EXPECT_GT(most, 0);
  EXPECT_FALSE(e->setup.burst_pool.enabled);
  EXPECT_FALSE(e->setup.apps[0].sl_min.has_value());
  auto with_sl = ParseExperiment(
      text.replace(text.find("latency_ms: 150"), 15, "latency_ms: 150\n    sl_min: 0.95"), ".");
  ASSERT_TRUE(with_sl.ok()) << with_sl.status();
  EXPECT_EQ(with_sl->setup.apps[0].sl_min, 0.95);
  auto pooled = ParseExperiment(
      text + "simulation:\n  burst_pool: {service_ms: 29, cold_start_ms: 2000, keep_warm_s: 600,\n"
             "               concurrency: 50, price_per_request: 0.0000004}\n",
      ".");
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  const BurstPool& pool = pooled->setup.burst_pool;
  EXPECT_TRUE(pool.enabled);
  EXPECT_EQ(pool.service, 29 * kMillisecond);
  EXPECT_EQ(pool.cold_start, 2 * kSecond);
  EXPECT_EQ(pool.keep_warm, 600 * kSecond);
  EXPECT_EQ(pool.concurrency, 50);
  EXPECT_DOUBLE_EQ(pool.price_per_request, 0.0000004);

  std::string off = with("name: on, idle", "name: off, idle");
  off.replace(off.find(allocator), allocator.size(), "mark");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with(allocator, "{name: mark, predictor: crystal-ball}"), "policies.allocator"},
      {with(allocator, "{name: mark, headroom: 0.5}"), "policies.allocator"},
      {with(allocator, "{name: mark, sample_s: 7}"), "policies.allocator"},
      {with(allocator, "{name: mark, horizon_units: 0}"), "policies.allocator.horizon_units"},
      {with(allocator, "{name: mark, predictor: lstm}"), "not available"},
      {off, "policies.cluster_autoscaler"},
      {with("latency_ms: 150", "latency_ms: 150\n    sl_min: 1.5"), "apps[0].sl_min"},
      {with("latency_ms: 150", "latency_ms: 150\n    sl_min: 0"), "apps[0].sl_min"},
      {with(allocator, "{name: mark, sl_min: 2}"), "sl_min must be in (0, 1]"},
      {with("launch_s: 40,", "launch_s: 40, billing_s: -60,"),
       "cluster.worker_types[0].billing_s"},
      {std::string(kManaged) + "simulation:\n  burst_pool: {service_ms: 0, price_per_request: 1}\n",
       "simulation.burst_pool.service_ms"},
      {std::string(kManaged) + "simulation:\n  burst_pool: {service_ms: 30}\n",
       "simulation.burst_pool.price_per_request"},
      {std::string(kManaged) +
           "simulation:\n  burst_pool: {service_ms: 30, price_per_request: 0, concurrency: 0}\n",
       "simulation.burst_pool.concurrency"},
  };
  for (const auto& [yaml, mentions] : cases) {
    auto bad = ParseExperiment(yaml, ".");
    ASSERT_FALSE(bad.ok()) << "expected an error naming " << mentions;
    EXPECT_NE(bad.status().message().find(mentions), std::string::npos)
        << "error \"" << bad.status().message() << "\" should name " << mentions;
  }
}

}  // namespace
}  // namespace maitre::sim
