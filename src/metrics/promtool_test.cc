// Checks the rendered text with Prometheus' own tool, `promtool check
// metrics`, which parses the exposition format and lints names. promtool
// comes from the Debian package `prometheus`, a declared dependency
// (scripts/install-deps); without it these tests fail rather than skip, so
// the /metrics acceptance check cannot silently go unrun.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "metrics/naming.h"
#include "metrics/metric_set.h"

namespace maitre::metrics {
namespace {

// The promtool to run: $MAITRE_PROMTOOL, else `promtool` on $PATH, else "".
std::string FindPromtool() {
  if (const char* path = std::getenv("MAITRE_PROMTOOL"); path != nullptr && *path != '\0') {
    return path;
  }
  const char* path_env = std::getenv("PATH");
  std::stringstream dirs(path_env != nullptr ? path_env : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/promtool";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `promtool check metrics` with `text` on stdin.
PromtoolResult CheckMetrics(const std::string& promtool, const std::string& text) {
  PromtoolResult result;
  const char* tmpdir = std::getenv("TMPDIR");
  std::string path = std::string(tmpdir != nullptr ? tmpdir : "/tmp") + "/maitre-metrics-XXXXXX";
  int fd = mkstemp(path.data());
  if (fd < 0) {
    result.output = "could not create a temporary file";
    return result;
  }
  close(fd);
  std::ofstream(path, std::ios::binary) << text;
  std::string command = "'" + promtool + "' check metrics < '" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe != nullptr) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
    int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::remove(path.c_str());
  return result;
}

class PromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    promtool_ = FindPromtool();
    ASSERT_FALSE(promtool_.empty())
        << "promtool not found on PATH (nor $MAITRE_PROMTOOL). It is a declared dependency: "
           "run scripts/install-deps (Debian package `prometheus`).";
  }
  std::string promtool_;
};

template <typename T>
T* Must(absl::StatusOr<T*> family) {
  EXPECT_TRUE(family.ok()) << family.status();
  return family.ok() ? *family : nullptr;
}

TEST_F(PromtoolTest, AcceptsEveryFeature) {
  MetricSet metric_set;
  const double inf = std::numeric_limits<double>::infinity();

  CounterFamily* requests = Must(metric_set.AddCounter(
      {"maitre_requests_total", "Requests answered, by model and variant.", {"model", "variant"}}));
  requests->With({"fmnist-cnn", "torch"}).Increment(12);
  requests->With({"fmnist-cnn", "onnx"}).Increment();
  CounterFamily* failures = Must(metric_set.AddCounter(
      {"maitre_request_failures_total", "Failed requests, by reason.", {"model", "reason"}}));
  failures->With({"fmnist-cnn", "deadline \"exceeded\"\nat C:\\queue"}).Increment(2);
  failures->With({"caf\xC3\xA9", "invalid \xFF utf-8"}).Increment();
  Counter compute = Must(metric_set.AddCounter(
      {"maitre_compute_seconds_total", "Seconds of compute.\nSecond line \\ backslash.", {}}))
      ->With();
  compute.Add(0.125);
  compute.Increment(uint64_t{1} << 60);
  Must(metric_set.AddCounter({"maitre_autoscaler_actions_total", "Scaling actions.", {}}));

  GaugeFamily* odd = Must(metric_set.AddGauge({"maitre_test_values", "Odd values.", {"case"}}));
  odd->With({"nan"}).Set(std::nan(""));
  odd->With({"pos_inf"}).Set(inf);
  odd->With({"neg_inf"}).Set(-inf);
  odd->With({"huge"}).Set(1.7976931348623157e308);
  odd->With({"tiny"}).Set(5e-324);
  odd->With({"negative"}).Set(-0.75);
  Must(metric_set.AddGauge({"maitre_unused", "Labelled, never used.", {"x"}}));

  HistogramFamily* latency = Must(metric_set.AddHistogram(
      {"maitre_request_duration_seconds", "End-to-end latency.", {"model", "variant"}}));
  Histogram h = latency->With({"fmnist-cnn", "torch"});
  for (double v : {0.00005, 0.0003, 0.002, 0.04, 0.7, 3.0, 30.0}) h.Observe(v);
  latency->With({"fmnist-cnn", "onnx"});  // exported with zero counts
  Must(metric_set.AddHistogram({"maitre_batch_size", "Batch sizes.", {}, ExponentialBuckets(1, 2, 6)}))
      ->With()
      .Observe(8);
  Must(metric_set.AddHistogram({"maitre_nothing_seconds", "Only +Inf.", {}, {}}));

  CollectedFamily* instances = Must(
      metric_set.AddCollectedGauge({"maitre_instances", "Instances by state.", {"state"}}));
  CollectedFamily* cost = Must(
      metric_set.AddCollectedGauge({"maitre_cost_rate_dollars_per_hour", "Cost rate.", {}}));
  CollectedFamily* reported = Must(metric_set.AddCollectedCounter(
      {"maitre_worker_reported_requests_total", "Worker-reported requests.", {"worker"}}));
  Must(metric_set.AddCollectedGauge({"maitre_never_collected", "No samples.", {}}));
  metric_set.AddCollector([&](Collector& c) {
    for (const char* state : {"ready", "loading", "ready", "failed"}) c.Add(instances, {state}, 1);
    c.Set(cost, {}, 3.5);
    c.Set(reported, {"127.0.0.1:9001"}, 1e7);
  });

  std::string text = metric_set.Render();
  PromtoolResult result = CheckMetrics(promtool_, text);
  EXPECT_EQ(result.exit_code, 0) << result.output << "\n--- rendered ---\n" << text;
  EXPECT_EQ(result.output, "") << "\n--- rendered ---\n" << text;
}

TEST_F(PromtoolTest, DetectsProblems) {
  // The test above is only meaningful if promtool does complain when it should.
  PromtoolResult result = CheckMetrics(promtool_, "# TYPE requests counter\nrequests 1\n");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output, "");
}

// The metric_set's name rules (naming.h) should refuse exactly what promtool
// lints. Each case is rendered by hand, bypassing the metric_set, and the set
// promtool flags is compared with the set ValidateMetricName/LabelNames
// refuses. Grammar errors are left out: promtool would fail to parse them.
TEST_F(PromtoolTest, NameRulesAgreeWithPromtool) {
  struct Case {
    const char* name;
    MetricType type;
    std::vector<std::string> labels;
  };
  const MetricType kC = MetricType::kCounter, kG = MetricType::kGauge,
                   kH = MetricType::kHistogram;
  const std::vector<Case> cases = {
      {"maitre_instances", kG, {}},
      {"maitre_worker_utilisation_ratio", kG, {"worker"}},
      {"ms_in_flight", kG, {}},
      {"msgs_in_flight", kG, {}},
      {"gauge_readings", kG, {}},
      {"model_size_bytes", kG, {}},
      {"size_mebibytes", kG, {}},  // promtool knows "mibi", not "mebi"
      {"labelled_ok", kG, {"model", "variant", "_private"}},
      {"MAITRE_SHOUTING", kG, {}},
      {"maitre_requests_total", kC, {"model"}},
      {"maitre_compute_seconds_total", kC, {}},
      {"maitre_queue_duration_seconds", kH, {"model"}},
      {"batch_count", kH, {}},
      {"maitre_requests", kC, {}},
      {"queue_total", kG, {}},
      {"lat_total", kH, {}},
      {"x_bucket", kG, {}},
      {"y_count", kG, {}},
      {"z_sum", kG, {}},
      {"fooBar", kG, {}},
      {"job:rate5m", kG, {}},
      {"lat_milliseconds", kG, {}},
      {"up_hours", kG, {}},
      {"model_kilobytes", kG, {}},
      {"nanoseconds_spent", kG, {}},
      {"lat_ms", kG, {}},
      {"lat_MS", kG, {}},
      {"size_b_x", kG, {}},
      {"load_sec", kG, {}},
      {"queue_gauge", kG, {}},
      {"lat_histogram_seconds", kH, {}},
      {"x_summary", kG, {}},
      {"label_camel", kG, {"myLabel"}},
      {"label_le", kG, {"le"}},
      {"label_quantile", kG, {"quantile"}},
  };

  std::string text;
  for (const Case& c : cases) {
    std::string labels;
    for (const std::string& label : c.labels) {
      labels += (labels.empty() ? "" : ",") + label + "=\"v\"";
    }
    text += std::string("# HELP ") + c.name + " Help.\n# TYPE " + c.name + " " +
            std::string(MetricTypeName(c.type)) + "\n";
    if (c.type == kH) {
      std::string le = labels.empty() ? "le=\"+Inf\"" : labels + ",le=\"+Inf\"";
      std::string braces = labels.empty() ? "" : "{" + labels + "}";
      text += std::string(c.name) + "_bucket{" + le + "} 1\n" + c.name + "_sum" + braces +
              " 1\n" + c.name + "_count" + braces + " 1\n";
    } else {
      text += std::string(c.name) + (labels.empty() ? "" : "{" + labels + "}") + " 1\n";
    }
  }
  PromtoolResult result = CheckMetrics(promtool_, text);
  ASSERT_EQ(result.output.find("error"), std::string::npos) << result.output;
  std::set<std::string> flagged;
  std::istringstream lines(result.output);
  std::string line;
  while (std::getline(lines, line)) flagged.insert(line.substr(0, line.find(' ')));

  for (const Case& c : cases) {
    bool refused = !ValidateMetricName(c.name, c.type).ok() || !ValidateLabelNames(c.labels).ok();
    EXPECT_EQ(refused, flagged.count(c.name) != 0)
        << c.name << ": metric_set " << (refused ? "refuses" : "accepts") << " it, promtool "
        << (flagged.count(c.name) != 0 ? "flags" : "accepts") << " it\n"
        << result.output;
  }
}

}  // namespace
}  // namespace maitre::metrics
