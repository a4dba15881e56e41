#include "loadgen/report.h"

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre::loadgen {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

TEST(PercentileTest, InterpolatesBetweenClosestRanks) {
  std::vector<double> one_to_hundred;
  for (int i = 1; i <= 100; ++i) one_to_hundred.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(one_to_hundred, 50), 50.5);
  EXPECT_DOUBLE_EQ(Percentile(one_to_hundred, 90), 90.1);
  EXPECT_DOUBLE_EQ(Percentile(one_to_hundred, 99), 99.01);
  EXPECT_DOUBLE_EQ(Percentile(one_to_hundred, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(one_to_hundred, 100), 100);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

TEST(SummarizeTest, SortsFirst) {
  Distribution d = Summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(d.count, 5);
  EXPECT_DOUBLE_EQ(d.mean, 3);
  EXPECT_DOUBLE_EQ(d.p50, 3);
  EXPECT_DOUBLE_EQ(d.p90, 4.6);
  EXPECT_DOUBLE_EQ(d.max, 5);
  EXPECT_EQ(Summarize({}).count, 0);
}

// Ten requests scheduled 100 ms apart from t = 1 s: seven answered (latency
// 10..70 ms, client lag 1 ms each; the first four in batches of 8 rows, the
// rest alone), two 503s and one never answered.
RunResult SampleRun() {
  RunResult run;
  run.start = kSecond;
  run.load_duration = kSecond;
  run.end = 2500 * kMillisecond;
  run.error_kinds = {"http 503"};
  run.error_examples = {"overloaded"};
  run.error_messages = {"overloaded", "queue \"full\", 12 waiting"};
  run.max_in_flight = 3;
  for (int i = 0; i < 10; ++i) {
    RequestRecord r;
    r.scheduled = kSecond + i * 100 * kMillisecond;
    r.sent = r.scheduled + kMillisecond;
    if (i < 7) {
      r.ok = true;
      r.done = r.scheduled + (i + 1) * 10 * kMillisecond;
      r.server = {1000 * (i + 1), 2000, 5000};
      r.server.batch_rows = i < 4 ? 8 : 1;
    } else if (i < 9) {
      r.done = r.sent + kMillisecond;
      r.error = 0;
      r.message = i - 7;
    }
    run.records.push_back(r);
  }
  return run;
}

RunDescription SampleDescription() {
  RunDescription d;
  d.model = "fmnist-mlp";
  d.protocol = "http";
  d.arrivals = "uniform";
  d.rate_qps = 10;
  d.slo_ms = 45;
  d.connections = 2;
  return d;
}

TEST(BuildReportTest, CountsLatencyFromTheScheduledTime) {
  BenchReport r = BuildReport(SampleRun(), SampleDescription());
  EXPECT_EQ(r.started, 10);
  EXPECT_EQ(r.ok, 7);
  EXPECT_EQ(r.failed, 2);
  EXPECT_EQ(r.unfinished, 1);
  EXPECT_DOUBLE_EQ(r.duration_s, 1.0);
  EXPECT_DOUBLE_EQ(r.window_s, 1.5);
  EXPECT_DOUBLE_EQ(r.send_rate_qps, 10);
  EXPECT_DOUBLE_EQ(r.throughput_qps, 7 / 1.5);
  EXPECT_EQ(r.latency_ms.count, 7);
  EXPECT_DOUBLE_EQ(r.latency_ms.p50, 40);
  EXPECT_DOUBLE_EQ(r.latency_ms.max, 70);
  EXPECT_DOUBLE_EQ(r.service_ms.p50, 39);  // one millisecond of it was client lag
  EXPECT_EQ(r.client_lag_ms.count, 10);    // the unanswered request left too
  EXPECT_DOUBLE_EQ(r.client_lag_ms.p99, 1);
  // 50, 60 and 70 ms exceed 45 ms; the three failures count as well.
  EXPECT_EQ(r.slo_violations, 6);
  EXPECT_DOUBLE_EQ(r.slo_violation_ratio, 0.6);
  EXPECT_EQ(r.answers_with_timings, 7);
  EXPECT_DOUBLE_EQ(r.queue_ms_p50, 4);
  EXPECT_DOUBLE_EQ(r.compute_ms_p50, 2);
  EXPECT_DOUBLE_EQ(r.total_ms_p50, 5);
  EXPECT_THAT(r.outside_server_ms_p50, DoubleNear(39 - 5, 1e-9));
  EXPECT_DOUBLE_EQ(r.batch_rows_mean, (4 * 8 + 3 * 1) / 7.0);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].kind, "http 503");
  EXPECT_EQ(r.errors[0].count, 2);
  EXPECT_EQ(r.errors[0].example, "overloaded");
  // The 503s came back 1 ms after they left.
  EXPECT_EQ(r.errors[0].latency_ms.count, 2);
  EXPECT_DOUBLE_EQ(r.errors[0].latency_ms.p99, 1);
  EXPECT_EQ(r.errors[1].kind, "unfinished");
  EXPECT_EQ(r.errors[1].count, 1);
  EXPECT_EQ(r.errors[1].latency_ms.count, 0);
}

TEST(BuildReportTest, ListsEveryFailureWithItsOwnMessage) {
  BenchReport r = BuildReport(SampleRun(), SampleDescription());
  ASSERT_EQ(r.failures.size(), 3u);
  EXPECT_DOUBLE_EQ(r.failures[0].at_s, 0.7);
  EXPECT_DOUBLE_EQ(r.failures[0].latency_ms, 1);
  EXPECT_EQ(r.failures[0].kind, "http 503");
  EXPECT_EQ(r.failures[0].message, "overloaded");
  EXPECT_EQ(r.failures[1].message, "queue \"full\", 12 waiting");
  EXPECT_EQ(r.failures[2].kind, "unfinished");
  EXPECT_DOUBLE_EQ(r.failures[2].latency_ms, -1);
  EXPECT_EQ(FailuresCsv(r),
            "at_s,latency_ms,kind,message\n"
            "0.700,1.000,\"http 503\",\"overloaded\"\n"
            "0.800,1.000,\"http 503\",\"queue \"\"full\"\", 12 waiting\"\n"
            "0.900,,\"unfinished\",\"\"\n");
}

TEST(BuildReportTest, WithoutAnSloNothingIsAViolation) {
  RunDescription d = SampleDescription();
  d.slo_ms.reset();
  BenchReport r = BuildReport(SampleRun(), d);
  EXPECT_EQ(r.slo_violations, 0);
  EXPECT_EQ(ReportJson(r)["slo"], nullptr);
}

TEST(BuildReportTest, AnEmptyRunIsAllZeros) {
  RunResult run;
  run.load_duration = kSecond;
  BenchReport r = BuildReport(run, SampleDescription());
  EXPECT_EQ(r.started, 0);
  EXPECT_EQ(r.throughput_qps, 0);
  EXPECT_EQ(r.queue_ms_p50, -1);
  EXPECT_EQ(r.batch_rows_mean, -1);
  EXPECT_THAT(FormatReport(r), HasSubstr("no timings"));
}

// An app's run over two seconds: in the first, three answers by "m:wide"
// (accuracy 0.9) and one failure; in the second, one by "m:wide", two by
// "m:small" (0.8) and one by a variant the server did not list.
TEST(BuildReportTest, CountsAnswersByVariantAndAccuracyPerSecond) {
  RunResult run;
  run.start = kSecond;
  run.load_duration = 2 * kSecond;
  run.end = 3 * kSecond;
  run.error_kinds = {"http 503"};
  const std::vector<std::string> variants = {"m:wide", "m:wide", "m:wide", "",
                                             "m:wide", "m:small", "m:small", "m:other"};
  for (size_t i = 0; i < variants.size(); ++i) {
    RequestRecord r;
    r.scheduled = run.start + static_cast<Nanos>(i) * 250 * kMillisecond;
    r.sent = r.scheduled;
    r.done = r.scheduled + (i == 6 ? 80 : 10) * kMillisecond;
    if (i == 3) {
      r.error = 0;
    } else {
      r.ok = true;
      r.server.variant = variants[i];
    }
    run.records.push_back(r);
  }
  RunDescription d = SampleDescription();
  d.variant_accuracy = {{"m:wide", 0.9}, {"m:small", 0.8}};
  BenchReport r = BuildReport(run, d);

  ASSERT_EQ(r.served.size(), 3u);
  EXPECT_EQ(r.served[0].variant, "m:wide");
  EXPECT_EQ(r.served[0].count, 4);
  EXPECT_EQ(r.served[1].variant, "m:small");
  EXPECT_EQ(r.served[2].variant, "m:other");
  EXPECT_EQ(r.served[2].accuracy, -1);
  EXPECT_DOUBLE_EQ(r.effective_accuracy, (4 * 0.9 + 2 * 0.8) / 6);

  ASSERT_EQ(r.series.size(), 2u);
  EXPECT_EQ(r.series[0].started, 4);
  EXPECT_EQ(r.series[0].ok, 3);
  EXPECT_EQ(r.series[0].failed, 1);
  EXPECT_EQ(r.series[0].slo_violations, 1);
  EXPECT_DOUBLE_EQ(r.series[0].effective_accuracy, 0.9);
  EXPECT_EQ(r.series[0].served, (std::vector<int64_t>{3, 0, 0}));
  EXPECT_EQ(r.series[1].slo_violations, 1);  // 80 ms against 45
  EXPECT_DOUBLE_EQ(r.series[1].effective_accuracy, (0.9 + 2 * 0.8) / 3);
  EXPECT_EQ(r.series[1].served, (std::vector<int64_t>{1, 2, 1}));

  std::vector<std::string> csv = absl::StrSplit(SeriesCsv(r), '\n');
  EXPECT_EQ(csv[0],
            "second,started,ok,failed,slo_violations,latency_p99_ms,effective_accuracy,m:wide,"
            "m:small,m:other");
  EXPECT_EQ(csv[1], "0,4,3,1,1,10.000,0.9000,3,0,0");
  EXPECT_THAT(FormatReport(r), HasSubstr("effective accuracy"));
  nlohmann::json j = ReportJson(r);
  EXPECT_EQ(j["served"][0]["variant"], "m:wide");
  EXPECT_EQ(j["served"][0]["answers"], 4);
  EXPECT_EQ(j["served"][2]["accuracy"], nullptr);
  EXPECT_DOUBLE_EQ(j["effective_accuracy"].get<double>(), (4 * 0.9 + 2 * 0.8) / 6);
}

TEST(ReportJsonTest, HasTheFieldsScriptsRead) {
  nlohmann::json j = ReportJson(BuildReport(SampleRun(), SampleDescription()));
  EXPECT_EQ(j["target"]["model"], "fmnist-mlp");
  EXPECT_EQ(j["protocol"], "http");
  EXPECT_EQ(j["load"]["mode"], "open");
  EXPECT_EQ(j["load"]["arrivals"], "uniform");
  EXPECT_EQ(j["load"]["rate_qps"], 10.0);
  EXPECT_EQ(j["requests"]["started"], 10);
  EXPECT_EQ(j["requests"]["ok"], 7);
  EXPECT_EQ(j["requests"]["failed"], 2);
  EXPECT_EQ(j["requests"]["unfinished"], 1);
  EXPECT_DOUBLE_EQ(j["throughput_qps"].get<double>(), 7 / 1.5);
  for (const char* key : {"latency_ms", "service_ms", "client_lag_ms"}) {
    for (const char* field : {"count", "mean", "p50", "p90", "p99", "max"}) {
      EXPECT_TRUE(j[key].contains(field)) << key << "." << field;
    }
  }
  EXPECT_DOUBLE_EQ(j["latency_ms"]["p50"].get<double>(), 40);
  EXPECT_EQ(j["slo"]["latency_ms"], 45.0);
  EXPECT_EQ(j["slo"]["violations"], 6);
  EXPECT_DOUBLE_EQ(j["slo"]["violation_ratio"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(j["server"]["queue_ms_p50"].get<double>(), 4);
  EXPECT_DOUBLE_EQ(j["server"]["compute_ms_p50"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(j["server"]["total_ms_p50"].get<double>(), 5);
  EXPECT_EQ(j["errors"]["http 503"], 2);
  EXPECT_EQ(j["errors"]["unfinished"], 1);
  EXPECT_EQ(j["error_examples"]["http 503"], "overloaded");
  EXPECT_EQ(j["error_latency_ms"]["http 503"]["count"], 2);
  EXPECT_FALSE(j["error_latency_ms"].contains("unfinished"));
  EXPECT_EQ(j["max_in_flight"], 3);
  EXPECT_EQ(j["connections"], 2);

  RunDescription closed = SampleDescription();
  closed.open_loop = false;
  closed.concurrency = 8;
  closed.model.clear();
  closed.app = "fmnist";
  j = ReportJson(BuildReport(SampleRun(), closed));
  EXPECT_EQ(j["load"], nlohmann::json({{"mode", "closed"}, {"concurrency", 8}}));
  EXPECT_EQ(j["target"]["app"], "fmnist");
}

TEST(FormatReportTest, AlignsThePercentileTable) {
  std::string text = FormatReport(BuildReport(SampleRun(), SampleDescription()));
  EXPECT_THAT(text, HasSubstr("model fmnist-mlp over http"));
  EXPECT_THAT(text, HasSubstr("http 503"));
  EXPECT_THAT(text, HasSubstr("overloaded"));
  EXPECT_THAT(text, HasSubstr("MEDIAN MS"));  // how fast each kind of failure came back
  // The numbers of the percentile table end in the same column as their
  // header.
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  const std::string* header = nullptr;
  const std::string* latency = nullptr;
  for (const std::string& line : lines) {
    if (line.find("P50") != std::string::npos) header = &line;
    if (line.rfind("  latency ", 0) == 0) latency = &line;
  }
  ASSERT_NE(header, nullptr);
  ASSERT_NE(latency, nullptr);
  EXPECT_EQ(header->size(), latency->size());
  EXPECT_EQ(header->find("P50") + 3, latency->find("40.000") + 6);
}

}  // namespace
}  // namespace maitre::loadgen
