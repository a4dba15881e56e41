// End-to-end: variant generation, profiling and accuracy, and model-less
// selection, on the zoo, through HTTP against a real `maitre serve` with real
// workers.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/profile.h"
#include "http/multipart.h"
#include "core/npz.h"
#include "runtime/testing/zoo.h"
#include "core/valset.h"
#include "testing/server_process.h"
#include "testing/wait.h"
#include "testing/zoo_requests.h"

namespace maitre {
namespace {

using nlohmann::json;
using runtime::testing::ScopedTempDir;
using testing::ServerOptions;
using testing::ImageRequest;
using testing::ServerProcess;

constexpr int kValsetRows = 500;

// "worker/variant" of an instance in the repository index (or of the one
// that served an answer).
std::string InstanceName(const json& model, const json& instance) {
  return absl::StrCat(instance["worker"].get<std::string>(), "/",
                      model["version"].get<std::string>());
}

// "worker/variant" a 504 says the query was sent to ("... passed before
// MODEL:VARIANT on WORKER answered it ..."), or "" when it names none.
std::string SentToIn504(const std::string& body) {
  const std::string before = " passed before ", on = " on ", answered = " answered it";
  size_t start = body.find(before);
  if (start == std::string::npos) return "";
  start += before.size();
  size_t at = body.find(on, start), end = body.find(answered, start);
  if (at == std::string::npos || end == std::string::npos || at > end) return "";
  std::string key = body.substr(start, at - start);
  size_t colon = key.find(':');
  if (colon == std::string::npos) return "";
  return absl::StrCat(body.substr(at + on.size(), end - at - on.size()), "/",
                      key.substr(colon + 1));
}

class VariantsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    zoo_ = new std::vector<runtime::testing::ZooModel>(*runtime::testing::LoadZoo());
    valset_ = *runtime::testing::ZooValset();
    small_ = new Valset();
    small_path_ = dir_->path() + "/valset.npz";
    ASSERT_TRUE(testing::WriteValsetSlice(*valset_, kValsetRows, small_path_, small_).ok());
    data_dir_ = dir_->path() + "/data";
    server_ = StartServer();
    ASSERT_NE(server_, nullptr);
    for (const auto& m : *zoo_) {
      auto r = server_->Register("fashion", m.name, m.torchscript, m.onnx, small_path_);
      ASSERT_TRUE(r.ok() && r->status / 100 == 2) << (r.ok() ? r->body : r.status().ToString());
    }
    // Generation, accuracy and profiling go on in the background.
    absl::Status profiled = server_->AwaitProfiles("fashion");
    ASSERT_TRUE(profiled.ok()) << profiled;
    auto table = server_->Get("/v2/apps/fashion?format=table");
    ASSERT_TRUE(table.ok());
    EXPECT_FALSE(absl::StrContains(table->body, "pending") ||
                 absl::StrContains(table->body, "no profile") ||
                 absl::StrContains(table->body, "refining"))
        << table->body;
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) EXPECT_TRUE(server_->Stop().ok());
    delete server_;
    delete small_;
    delete zoo_;
    delete dir_;
  }

  // Each profile is measured once here: how sweeps refine a profile is
  // ProfilesRefineInSweepsUntilFinal's business.
  static ServerProcess* StartServer() {
    ServerOptions options;
    options.data_dir = data_dir_;
    options.extra_args = {"--profile-sweeps", "1"};
    auto server = ServerProcess::Start(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? server->release() : nullptr;
  }

  static json App() { return *server_->GetJson("/v2/apps/fashion"); }

  // The best p50 at batch 1 of `model` over its variants and types, and the
  // worst.
  static std::pair<double, double> LatencyRange(const json& app, const std::string& model) {
    double best = 1e9, worst = 0;
    for (const json& m : app["models"]) {
      if (m["name"] != model) continue;
      for (const json& v : m["variants"]) {
        for (const auto& [type, p] : v["profiles"].items()) {
          best = std::min(best, p["p50_batch1_ms"].get<double>());
          worst = std::max(worst, p["p50_batch1_ms"].get<double>());
        }
      }
    }
    return {best, worst};
  }

  static ScopedTempDir* dir_;
  static std::vector<runtime::testing::ZooModel>* zoo_;
  static const Valset* valset_;
  static Valset* small_;
  static std::string small_path_;
  static std::string data_dir_;
  static ServerProcess* server_;
};

ScopedTempDir* VariantsTest::dir_ = nullptr;
std::vector<runtime::testing::ZooModel>* VariantsTest::zoo_ = nullptr;
const Valset* VariantsTest::valset_ = nullptr;
Valset* VariantsTest::small_ = nullptr;
std::string VariantsTest::small_path_;
std::string VariantsTest::data_dir_;
ServerProcess* VariantsTest::server_ = nullptr;

// Variant generation: at least 4 variants × 2 worker types with full profiles
// per model; int8 measured, not copied.
TEST_F(VariantsTest, EveryModelHasProfiledVariantsOnEveryType) {
  json app = App();
  ASSERT_EQ(app["models"].size(), zoo_->size());
  for (const json& m : app["models"]) {
    int profiled = 0;
    for (const json& v : m["variants"]) {
      EXPECT_EQ(v["state"], "ready") << m["name"] << ":" << v["variant"] << " " << v["detail"];
      EXPECT_EQ(v["accuracy_source"], "measured") << m["name"] << ":" << v["variant"];
      for (const char* type : {"cpu-1", "cpu-2"}) {
        if (!v["profiles"].contains(type)) continue;
        const json& p = v["profiles"][type];
        EXPECT_GE(p["points"].size(), 4u) << m["name"] << ":" << v["variant"] << " on " << type;
        EXPECT_GT(p["p50_batch1_ms"].get<double>(), 0);
        EXPECT_EQ(p["sweeps_left"], 0) << m["name"] << ":" << v["variant"] << " on " << type;
        ++profiled;
      }
    }
    EXPECT_GE(m["variants"].size(), 4u) << m["name"];
    EXPECT_GE(profiled, 8) << m["name"];
  }
  auto csv = server_->Get("/v2/profiles?app=fashion");
  ASSERT_TRUE(csv.ok());
  EXPECT_TRUE(absl::StartsWith(
      csv->body,
      "model,variant,worker_type,batch,latency_p50_ms,latency_p99_ms,load_ms,memory_mb,accuracy"));
}

// Profiles are measured in three to six sweeps (controller/models/profile_sweeps.h),
// spaced out, each kept at its fastest, and say when they are final. The
// schedule itself is unit-tested on a manual clock; this is the real thing,
// on the smallest model, with the sweeps a second apart.
TEST_F(VariantsTest, ProfilesRefineInSweepsUntilFinal) {
  ScopedTempDir data;
  ServerOptions options;
  options.data_dir = data.path();
  options.extra_args = {"--profile-sweeps", "3", "--profile-sweep-spacing", "1"};
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const auto& logreg = zoo_->at(0);
  ASSERT_EQ(logreg.name, "fmnist-logreg");
  auto r = (*server)->Register("sweeps", logreg.name, logreg.torchscript, logreg.onnx, small_path_);
  ASSERT_TRUE(r.ok() && r->status / 100 == 2) << (r.ok() ? r->body : r.status().ToString());
  absl::Status profiled = (*server)->AwaitProfiles("sweeps");
  ASSERT_TRUE(profiled.ok()) << profiled;
  const std::string log = (*server)->Log();
  EXPECT_TRUE(absl::StrContains(log, "variant pipeline: profiling fmnist-logreg:torch on cpu-1 "
                                     "(sweep 3 of at most 6)"))
      << log;
  EXPECT_TRUE(absl::StrContains(log, "variant pipeline: the profile of fmnist-logreg:torch on "
                                     "cpu-1 is final"))
      << log;
  EXPECT_TRUE((*server)->Stop().ok());
}

// Accuracy: each variant's stored accuracy is what querying it gives.
TEST_F(VariantsTest, StoredAccuracyIsWhatServingTheVariantGives) {
  json app = App();
  const int64_t* labels = small_->labels.As<int64_t>();
  for (const json& m : app["models"]) {
    for (const json& v : m["variants"]) {
      std::string path = absl::StrCat("/v2/models/", m["name"].get<std::string>(), ":",
                                      v["variant"].get<std::string>(), "/infer");
      int correct = 0;
      for (int i = 0; i < kValsetRows; ++i) {
        auto r = server_->Post(path, ImageRequest(*small_, i, nullptr));
        ASSERT_TRUE(r.ok() && r->status == 200) << path << " " << (r.ok() ? r->body : "");
        json out = json::parse(r->body)["outputs"][0]["data"];
        int best = 0;
        for (int c = 1; c < 10; ++c) best = out[c] > out[best] ? c : best;
        correct += best == labels[i];
      }
      double served = static_cast<double>(correct) / kValsetRows;
      EXPECT_NEAR(served, v["accuracy"].get<double>(), 0.005) << path;
    }
  }
}

// Model-less selection: tight latency, an accuracy floor, and requirements none
// can meet.
TEST_F(VariantsTest, SelectionHonoursRequirements) {
  json app = App();
  // Each model's fastest variant stands for the model.
  double logreg = LatencyRange(app, "fmnist-logreg").first;
  double wide = LatencyRange(app, "fmnist-cnn-wide").first;
  ASSERT_LT(logreg, wide);
  // Below the large CNN's p50 at batch 1, above the logistic regression's.
  double tight = std::sqrt(logreg * wide);
  json served;
  for (int attempt = 0; attempt < 10 && served.is_null(); ++attempt) {
    auto r = server_->Post("/v2/apps/fashion/infer",
                           ImageRequest(*small_, 0, {{"latency_ms", tight}}));
    ASSERT_TRUE(r.ok());
    if (r->status == 200) served = json::parse(r->body);  // the first may wait for a load
  }
  ASSERT_FALSE(served.is_null()) << "no tight-latency query was served";
  EXPECT_NE(served["model_name"], "fmnist-cnn-wide");
  for (const json& m : app["models"]) {
    if (m["name"] != served["model_name"]) continue;
    for (const json& v : m["variants"]) {
      if (v["variant"] != served["model_version"]) continue;
      const json& p = v["profiles"][served["parameters"]["worker_type"].get<std::string>()];
      EXPECT_LE(p["p50_batch1_ms"].get<double>(), tight) << served.dump();
    }
  }

  double mlp_accuracy = 0, best_accuracy = 0;
  for (const json& m : app["models"]) {
    for (const json& v : m["variants"]) {
      best_accuracy = std::max(best_accuracy, v["accuracy"].get<double>());
      if (m["name"] == "fmnist-mlp") mlp_accuracy = std::max(mlp_accuracy, v["accuracy"].get<double>());
    }
  }
  auto accurate = server_->Post("/v2/apps/fashion/infer",
                                ImageRequest(*small_, 0, {{"min_accuracy", mlp_accuracy + 0.005}}));
  ASSERT_TRUE(accurate.ok());
  ASSERT_EQ(accurate->status, 200) << accurate->body;
  std::string model = json::parse(accurate->body)["model_name"];
  EXPECT_TRUE(model == "fmnist-cnn" || model == "fmnist-cnn-wide") << model;

  auto impossible = server_->Post(
      "/v2/apps/fashion/infer", ImageRequest(*small_, 0, {{"min_accuracy", best_accuracy + 0.01}}));
  ASSERT_TRUE(impossible.ok());
  EXPECT_EQ(impossible->status, 422) << impossible->body;
  EXPECT_TRUE(absl::StrContains(impossible->body, "closest is fmnist-")) << impossible->body;
}

// Registration: bad registrations get 400 and change nothing.
TEST_F(VariantsTest, BadRegistrationsChangeNothing) {
  const auto& mlp = zoo_->at(1);
  auto model = ReadFileToString(mlp.torchscript);
  ASSERT_TRUE(model.ok());
  std::string corrupt = dir_->path() + "/corrupt.pt";
  ASSERT_TRUE(WriteFileAtomically(corrupt, model->substr(0, model->size() / 2)).ok());
  std::string short_labels = dir_->path() + "/short-labels.npz";
  std::string float_labels = dir_->path() + "/float-labels.npz";
  std::string wrong_inputs = dir_->path() + "/wrong-inputs.npz";
  Tensor inputs = *SliceRows(small_->inputs, 0, 10);
  inputs.name = "inputs";
  Tensor labels = *SliceRows(small_->labels, 0, 9);
  labels.name = "labels";
  ASSERT_TRUE(WriteFileAtomically(short_labels, WriteNpz({inputs, labels})).ok());
  Tensor fl{"labels", DataType::kFp32, {10}, std::string(40, '\0')};
  ASSERT_TRUE(WriteFileAtomically(float_labels, WriteNpz({inputs, fl})).ok());
  Tensor flat{"inputs", DataType::kFp32, {10, 784}, std::string(10 * 784 * 4, '\0')};
  Tensor ten = *SliceRows(small_->labels, 0, 10);
  ten.name = "labels";
  ASSERT_TRUE(WriteFileAtomically(wrong_inputs, WriteNpz({flat, ten})).ok());

  std::string before = App().dump();
  for (const auto& [name, file, valset] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"corrupt", corrupt, ""},
           {"short-labels", mlp.torchscript, short_labels},
           {"float-labels", mlp.torchscript, float_labels},
           {"wrong-inputs", mlp.torchscript, wrong_inputs}}) {
    auto r = server_->Register("fashion", "bad-" + name, file, "", valset);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400) << name << ": " << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, "error")) << name;
  }
  EXPECT_EQ(App().dump(), before) << "a rejected registration changed the registry";
}

// Durability: a restart keeps variants and profiles without profiling again.
TEST_F(VariantsTest, RestartKeepsProfilesWithoutProfilingAgain) {
  auto before = server_->Get("/v2/profiles?app=fashion");
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(server_->Stop().ok());
  delete server_;
  server_ = StartServer();
  ASSERT_NE(server_, nullptr);
  // Give the pipeline time to do anything it wanted to do.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  auto after = server_->Get("/v2/profiles?app=fashion");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->body, before->body);
  auto log = ReadFileToString(data_dir_ + "/serve.log");
  ASSERT_TRUE(log.ok());
  // The second start's log has no profiling in it.
  size_t restart = log->rfind("maitre serving:");
  EXPECT_EQ(log->find("variant pipeline: profiling", restart), std::string::npos);
}

// Instance states: an instance driven past its saturation is reported
// Overloaded in the repository index, and new queries then go to another
// instance or another variant. Runs last: it changes the app's defaults.
TEST_F(VariantsTest, SustainedOverloadIsReportedAndRoutedAround) {
  json app = App();
  // A floor above the small CNN's accuracy leaves only the wide CNN.
  double cnn_best = 0;
  for (const json& m : app["models"]) {
    if (m["name"] != "fmnist-cnn") continue;
    for (const json& v : m["variants"]) cnn_best = std::max(cnn_best, v["accuracy"].get<double>());
  }
  const double floor = cnn_best + 0.001;
  // Requests of many rows make one instance's capacity, not the HTTP front
  // end on this small machine, the bottleneck.
  constexpr double kLatencyMs = 20;
  constexpr int kRowsPerQuery = 32;
  // The most one qualifying instance sustains at the objective, in queries.
  double one_instance_qps = 0;
  std::set<std::string> qualifying;  // "model:variant"
  for (const json& m : app["models"]) {
    for (const json& v : m["variants"]) {
      if (v["accuracy"].get<double>() < floor) continue;
      qualifying.insert(absl::StrCat(m["name"].get<std::string>(), ":",
                                     v["variant"].get<std::string>()));
      for (const auto& [type, p] : v["profiles"].items()) {
        std::vector<LatencyPoint> points;
        for (const json& pt : p["points"]) {
          points.push_back({pt["batch"].get<int>(), pt["p50_ms"].get<double>(),
                            pt["p99_ms"].get<double>()});
        }
        auto profile = Profile::Create(std::move(points), 0, 0);
        ASSERT_TRUE(profile.ok()) << profile.status();
        one_instance_qps =
            std::max(one_instance_qps, profile->SaturationQps(kLatencyMs) / kRowsPerQuery);
      }
    }
  }
  ASSERT_GT(one_instance_qps, 0) << "no wide-CNN variant fits " << kLatencyMs << " ms";
  // Half as much again as one instance sustains by its profile. (The load
  // generator and front end share this machine's cores with the workers, so
  // the instance really serves less than that.)
  const double rate = 1.5 * one_instance_qps;
  auto defaults = server_->client().Send(
      "PUT", "/v2/apps/fashion",
      json{{"latency_ms", kLatencyMs}, {"min_accuracy", floor}}.dump(),
      {{"Content-Type", "application/json"}});
  ASSERT_TRUE(defaults.ok() && defaults->status == 200);

  const std::string report_path = dir_->path() + "/overload-bench.json";
  const std::string bench = absl::StrCat(
      testing::MaitreBinary(), " bench --server ", server_->url(), " --app fashion --rate ", rate,
      " --duration 20 --protocol http-binary --input ", small_path_, " --batch ", kRowsPerQuery,
      " --json > ", report_path,
      " 2>/dev/null");
  int bench_exit = -1;
  std::thread load([&] { bench_exit = std::system(bench.c_str()); });

  // Watch the index until an instance is reported Overloaded.
  std::string overloaded;  // InstanceName
  std::string trace;       // what the index showed, for a failure message
  for (int i = 0; i < 30 && overloaded.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto index = server_->RepositoryIndex();
    ASSERT_TRUE(index.ok()) << index.status();
    absl::StrAppend(&trace, "\n", i * 0.5 + 0.5, "s:");
    for (const json& m : (*index)["models"]) {
      for (const json& inst : m["instances"]) {
        if (inst["served_qps"].get<double>() <= 0) continue;
        absl::StrAppend(&trace, " ", InstanceName(m, inst), ":", inst["state"].get<std::string>(),
                        ":", inst["served_qps"].get<double>(), "/",
                        inst["arrival_qps"].get<double>());
        if (inst["state"] == "overloaded") overloaded = InstanceName(m, inst);
      }
    }
  }
  // New queries (under the same defaults) then go elsewhere. The load
  // saturates every core of this small machine, so a query sent elsewhere
  // may still time out: what is checked is where selection sends it, read
  // from the answer or from the 504's "before MODEL:VARIANT on WORKER". A
  // query sent to the overloaded instance counts against only while the
  // index still reports it overloaded (once recovered it may take queries
  // again) and shows a qualifying instance elsewhere Active: under this
  // load the other copies turn Interfered or Overloaded too, and with no
  // healthy instance selection's degraded step serves on an unhealthy one,
  // which may be this one (a CI run on a loaded host sent one query there
  // just after the second copy had answered one).
  int elsewhere = 0, while_overloaded = 0, served_elsewhere = 0;
  std::string log;
  auto state_of = [&](const std::string& worker_variant) -> std::string {
    auto index = server_->RepositoryIndex();
    if (!index.ok()) return "unknown";
    for (const json& m : (*index)["models"]) {
      for (const json& inst : m["instances"]) {
        if (InstanceName(m, inst) == worker_variant) return inst["state"];
      }
    }
    return "gone";
  };
  auto active_alternative = [&]() -> bool {
    auto index = server_->RepositoryIndex();
    if (!index.ok()) return false;
    for (const json& m : (*index)["models"]) {
      if (qualifying.count(absl::StrCat(m["name"].get<std::string>(), ":",
                                        m["version"].get<std::string>())) == 0) {
        continue;
      }
      for (const json& inst : m["instances"]) {
        if (InstanceName(m, inst) != overloaded && inst["state"] == "active") return true;
      }
    }
    return false;
  };
  for (int i = 0; i < 40 && elsewhere < 3 && !overloaded.empty(); ++i) {
    auto r = server_->Post("/v2/apps/fashion/infer", ImageRequest(*small_, i, nullptr));
    ASSERT_TRUE(r.ok());
    std::string by;  // worker/variant it was sent to; empty when it was sent nowhere
    if (r->status == 200) {
      json answer = json::parse(r->body);
      by = InstanceName({{"version", answer["model_version"]}}, answer["parameters"]);
    } else {
      absl::StrAppend(&log, "\n", r->status, " ", r->body.substr(0, 160));
      by = SentToIn504(r->body);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (by.empty()) continue;
    if (by != overloaded) {
      ++elsewhere;
      served_elsewhere += r->status == 200 ? 1 : 0;
    } else {
      std::string state = state_of(overloaded);
      const bool alternative = active_alternative();
      absl::StrAppend(&log, "\nsent to ", overloaded, " (", r->status, "), now ", state,
                      alternative ? ", another copy Active" : ", no other copy Active");
      while_overloaded += state == "overloaded" && alternative ? 1 : 0;
    }
  }
  load.join();
  std::cout << "overload: " << rate << " req/s of " << kRowsPerQuery
            << " rows (one instance's profiled saturation: " << one_instance_qps << " req/s); "
            << (overloaded.empty() ? "none" : overloaded) << " reported overloaded; then "
            << elsewhere << " new queries sent elsewhere (" << served_elsewhere
            << " answered in time), " << while_overloaded
            << " to it while overloaded with another copy Active\n";
  ASSERT_FALSE(overloaded.empty()) << "the index showed:" << trace;
  EXPECT_GE(elsewhere, 1) << log;
  EXPECT_GT(elsewhere, while_overloaded) << log;

  // Nothing accepted was lost, and the server still serves.
  EXPECT_EQ(bench_exit, 0);
  auto report = ReadFileToString(report_path);
  ASSERT_TRUE(report.ok());
  json j = json::parse(*report);
  EXPECT_EQ(j["requests"]["unfinished"], 0) << *report;
  EXPECT_GT(j["requests"]["ok"].get<int64_t>(), 0) << *report;
  // Every answer named its variant, and the app listed each one's accuracy.
  ASSERT_FALSE(j["served"].empty()) << *report;
  for (const json& v : j["served"]) EXPECT_TRUE(v["accuracy"].is_number()) << *report;
  EXPECT_GT(j["effective_accuracy"].get<double>(), 0.8) << *report;
  // Once the burst is over (the machine may still be busy loading what the
  // autoscaler asked for), queries are served again.
  http::Response after;
  testing::WaitUntil(
      [&] {
        auto r = server_->Post("/v2/apps/fashion/infer", ImageRequest(*small_, 0, nullptr));
        if (r.ok()) after = *r;
        return r.ok() && after.status == 200;
      },
      120);
  EXPECT_EQ(after.status, 200) << after.body;
}

}  // namespace
}  // namespace maitre
