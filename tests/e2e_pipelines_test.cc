// End-to-end: the zoo's cascade as a served pipeline (docs/pipelines.md,
// "Serving a pipeline"; docs/api.md, "Pipelines"), against a real `maitre
// serve` with a real worker: bad specs get 400s naming the vertex, the
// cascade answers as the two models' own answers say it should, its
// answers name the stages that ran, and it survives a restart; a plan
// applied to it is checked and provisioned, and its models may not be
// deleted while it is registered.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/valset.h"
#include "inference.grpc.pb.h"
#include "runtime/testing/zoo.h"
#include "testing/server_process.h"
#include "testing/wait.h"
#include "testing/zoo_requests.h"

namespace maitre {
namespace {

using nlohmann::json;
using runtime::testing::ScopedTempDir;
using testing::ServerOptions;
using testing::ServerProcess;

constexpr char kApp[] = "fashion";
constexpr double kThreshold = 0.8;
constexpr int64_t kImages = 1000;
constexpr int64_t kRowsPerQuery = 50;

json Cascade() {
  return json::parse(R"({
    "vertices": [
      {"name": "fast", "model": "fmnist-logreg", "inputs": {"input": "$image"}},
      {"name": "slow", "model": "fmnist-cnn-wide", "inputs": {"input": "$image"}}],
    "edges": [{"from": "fast", "to": "slow",
               "when": {"output": "logits", "max_softmax_below": 0.8}}],
    "outputs": {"logits": ["slow.logits", "fast.logits"]}})");
}

// Per row of an answer's "logits" output: the top class and the top
// class's softmax probability.
struct Row {
  int64_t label = 0;
  double confidence = 0;
};

std::vector<Row> RowsOf(const json& answer) {
  const json& out = answer.at("outputs").at(0);
  const int64_t classes = out.at("shape").at(1).get<int64_t>();
  std::vector<double> x = out.at("data").get<std::vector<double>>();
  std::vector<Row> rows;
  for (size_t at = 0; at + classes <= x.size(); at += classes) {
    auto begin = x.begin() + at, end = begin + classes;
    const double top = *std::max_element(begin, end);
    double sum = 0;
    for (auto it = begin; it != end; ++it) sum += std::exp(*it - top);
    rows.push_back({std::max_element(begin, end) - begin, 1 / sum});
  }
  return rows;
}

// What `maitre <args>` printed (stdout and stderr), and its exit status.
std::pair<std::string, int> RunMaitre(const std::string& args) {
  std::string command = absl::StrCat(testing::MaitreBinary(), " ", args, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {"cannot run " + command, -1};
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  return {out, pclose(pipe)};
}

class PipelinesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    const std::string valset_path = dir_->path() + "/valset.npz";
    valset_ = new Valset();
    ASSERT_TRUE(testing::WriteValsetSlice(**runtime::testing::ZooValset(), kImages, valset_path,
                                          valset_)
                    .ok());
    server_ = StartServer();
    ASSERT_NE(server_, nullptr);
    auto zoo = runtime::testing::LoadZoo();
    ASSERT_TRUE(zoo.ok()) << zoo.status();
    for (const auto& m : *zoo) {
      if (m.name != "fmnist-logreg" && m.name != "fmnist-cnn-wide") continue;
      auto r = server_->Register(kApp, m.name, m.torchscript, m.onnx, valset_path);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->status, 201) << m.name << ": " << r->body;
    }
    // Another app's model: a pipeline of "fashion" may not name it.
    for (const auto& m : *zoo) {
      if (m.name != "fmnist-mlp") continue;
      auto r = server_->Register("other", m.name, m.torchscript, m.onnx, "");
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->status, 201) << r->body;
    }
  }
  static ServerProcess* StartServer() {
    ServerOptions options;
    options.data_dir = dir_->path() + "/data";
    options.workers = "cpu-1:1";
    options.extra_args = {"--profile-sweeps", "1"};
    auto server = ServerProcess::Start(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? server->release() : nullptr;
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) EXPECT_TRUE(server_->Stop().ok());
    delete server_;
    delete valset_;
    delete dir_;
  }

  static absl::StatusOr<http::Response> Send(const std::string& method, const std::string& path,
                                             const std::string& body = "") {
    return server_->SendAs(server_->admin_key(), method, path, body);
  }
  static absl::StatusOr<json> Infer(const std::string& path, int64_t first, int64_t rows,
                                    const std::string& input) {
    auto r = Send("POST", path, testing::ImagesRequest(*valset_, first, rows, input, nullptr));
    if (!r.ok()) return r.status();
    if (r->status != 200) return absl::InternalError(absl::StrCat(r->status, " ", r->body));
    return json::parse(r->body);
  }
  static int64_t Label(int64_t row) { return valset_->labels.As<int64_t>()[row]; }

  static ScopedTempDir* dir_;
  static Valset* valset_;
  static ServerProcess* server_;
};

ScopedTempDir* PipelinesTest::dir_ = nullptr;
Valset* PipelinesTest::valset_ = nullptr;
ServerProcess* PipelinesTest::server_ = nullptr;

// Each bad spec gets a 400 naming the vertex at fault, and nothing is
// registered.
TEST_F(PipelinesTest, BadSpecsAreRefusedNamingTheVertex) {
  json cycle = Cascade();
  cycle["edges"].push_back({{"from", "slow"}, {"to", "fast"}});
  json unknown = Cascade();
  unknown["vertices"][1]["model"] = "no-such-model";
  json foreign = Cascade();
  foreign["vertices"][1]["model"] = "fmnist-mlp";  // the app "other"'s
  json mismatch = Cascade();
  mismatch["vertices"][1]["inputs"]["input"] = "fast.logits";
  for (const auto& [spec, message] :
       {std::pair{cycle, std::string("lies on a cycle")},
        {unknown, "vertex \"slow\": unknown model \"no-such-model\""},
        {foreign, "vertex \"slow\": unknown model \"fmnist-mlp\""},
        {mismatch, "vertex \"slow\" input \"input\": type mismatch"}}) {
    auto r = Send("PUT", absl::StrCat("/v2/apps/", kApp, "/pipelines/bad"), spec.dump());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 400) << r->body;
    const std::string error = json::parse(r->body).value("error", "");
    EXPECT_TRUE(absl::StrContains(error, message)) << error << " lacks " << message;
  }
  auto not_json = Send("PUT", absl::StrCat("/v2/apps/", kApp, "/pipelines/bad"), "{");
  ASSERT_TRUE(not_json.ok());
  EXPECT_EQ(not_json->status, 400) << not_json->body;
  // The path's name follows the rules of model names (it shares their route).
  auto bad_name = Send("PUT", absl::StrCat("/v2/apps/", kApp, "/pipelines/bad:name"), "{}");
  ASSERT_TRUE(bad_name.ok());
  EXPECT_EQ(bad_name->status, 400) << bad_name->body;
  EXPECT_TRUE(absl::StrContains(bad_name->body, "pipeline name")) << bad_name->body;
  // A model's name is taken: /v2/models/{name} must reach one thing.
  auto taken = Send("PUT", absl::StrCat("/v2/apps/", kApp, "/pipelines/fmnist-logreg"),
                    Cascade().dump());
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->status, 409) << taken->body;
  auto bad = Send("GET", absl::StrCat("/v2/apps/", kApp, "/pipelines/bad"));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 404) << bad->body;
}

// The cascade's answers equal what the two models' own answers say it
// should give, image by image; each answer names the stages that ran;
// and the pipeline is there after a restart.
TEST_F(PipelinesTest, TheCascadeAnswersAsItsModelsSayAndSurvivesARestart) {
  const std::string one = absl::StrCat("/v2/apps/", kApp, "/pipelines/fmnist-cascade");
  auto put = Send("PUT", one, Cascade().dump());
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_EQ(put->status, 201) << put->body;
  auto again = Send("PUT", one, Cascade().dump());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 200) << again->body;  // replaced, not created
  auto listed = server_->GetJson(absl::StrCat("/v2/apps/", kApp, "/pipelines"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->at("pipelines").size(), 1u);
  EXPECT_EQ(listed->at("pipelines")[0].at("order"), json({"fast", "slow"}));
  // Nor may a model take the pipeline's name.
  auto zoo = runtime::testing::LoadZoo();
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  const auto& logreg = *std::find_if(zoo->begin(), zoo->end(),
                                     [](const auto& m) { return m.name == "fmnist-logreg"; });
  auto model_taken =
      server_->Register(kApp, "fmnist-cascade", logreg.torchscript, logreg.onnx, "");
  ASSERT_TRUE(model_taken.ok()) << model_taken.status();
  EXPECT_EQ(model_taken->status, 409) << model_taken->body;

  int64_t correct_pipeline = 0, correct_offline = 0, slow_rows = 0, agree = 0;
  for (int64_t first = 0; first < kImages; first += kRowsPerQuery) {
    auto fast = Infer("/v2/models/fmnist-logreg/infer", first, kRowsPerQuery, "input");
    auto slow = Infer("/v2/models/fmnist-cnn-wide/infer", first, kRowsPerQuery, "input");
    // Half through the app's route, half through the Open Inference
    // Protocol's: the same pipeline.
    const std::string path = (first / kRowsPerQuery) % 2 == 0
                                 ? one + "/infer"
                                 : std::string("/v2/models/fmnist-cascade/infer");
    auto cascade = Infer(path, first, kRowsPerQuery, "image");
    ASSERT_TRUE(fast.ok()) << fast.status();
    ASSERT_TRUE(slow.ok()) << slow.status();
    ASSERT_TRUE(cascade.ok()) << cascade.status();
    std::vector<Row> f = RowsOf(*fast), s = RowsOf(*slow), c = RowsOf(*cascade);
    ASSERT_EQ(c.size(), static_cast<size_t>(kRowsPerQuery));
    int64_t unsure = 0;
    for (int64_t i = 0; i < kRowsPerQuery; ++i) {
      const bool to_slow = f[i].confidence < kThreshold;
      unsure += to_slow;
      const int64_t offline = to_slow ? s[i].label : f[i].label;
      correct_offline += offline == Label(first + i);
      correct_pipeline += c[i].label == Label(first + i);
      agree += c[i].label == offline;
    }
    slow_rows += unsure;
    // The answer names the stages that ran, with their rows and timings.
    const json& params = cascade->at("parameters");
    EXPECT_EQ(params.at("pipeline"), "fmnist-cascade");
    const json& stages = params.at("stages");
    ASSERT_GE(stages.size(), 1u) << params;
    EXPECT_EQ(stages[0].at("vertex"), "fast");
    EXPECT_EQ(stages[0].at("rows"), kRowsPerQuery);
    if (unsure > 0) {
      ASSERT_EQ(stages.size(), 2u) << params;
      EXPECT_EQ(stages[1].at("vertex"), "slow");
      EXPECT_EQ(stages[1].at("model"), "fmnist-cnn-wide");
      // The fast model's own answer and the stage's may come from
      // different variants; the count is the same up to rows at the edge.
      EXPECT_NEAR(stages[1].at("rows").get<double>(), unsure, 2) << params;
      EXPECT_LE(stages[0].at("finished_us").get<int64_t>(),
                stages[1].at("started_us").get<int64_t>());
    }
    EXPECT_LE(stages.back().at("finished_us").get<int64_t>(),
              params.at("total_us").get<int64_t>());
  }
  const double pipeline_accuracy = static_cast<double>(correct_pipeline) / kImages;
  const double offline_accuracy = static_cast<double>(correct_offline) / kImages;
  std::printf("cascade on %lld validation images: accuracy %.4f served, %.4f offline; "
              "%.1f%% of images reached the slow stage; answers agree on %lld\n",
              static_cast<long long>(kImages), pipeline_accuracy, offline_accuracy,
              100.0 * slow_rows / kImages, static_cast<long long>(agree));
  // Each stage may be served by another variant of its model than the
  // model's own query was (the policy chooses per query), so a row near
  // the threshold may go the other way; hardly any may.
  EXPECT_GE(agree, kImages * 99 / 100);
  EXPECT_NEAR(pipeline_accuracy, offline_accuracy, 0.01);
  EXPECT_GT(slow_rows, 0);
  EXPECT_LT(slow_rows, kImages);

  // Bad queries get 400s, and the pipeline keeps serving.
  auto wrong_input = Send("POST", one + "/infer",
                          testing::ImagesRequest(*valset_, 0, 1, "input", nullptr));
  ASSERT_TRUE(wrong_input.ok());
  EXPECT_EQ(wrong_input->status, 400) << wrong_input->body;
  EXPECT_TRUE(absl::StrContains(wrong_input->body, "has no input 'input'")) << wrong_input->body;

  ASSERT_TRUE(server_->Stop().ok());
  delete server_;
  server_ = StartServer();
  ASSERT_NE(server_, nullptr);
  // Profiling the first run left unfinished resumes on the one worker. A
  // load no longer waits behind it (the worker runs loads on a queue of
  // their own: before, a CI run's first query after the restart waited out
  // its 30 s deadline behind the other app's sweeps), but the query is
  // judged on settled profiles.
  ASSERT_TRUE(server_->AwaitProfiles(kApp).ok()) << server_->Log();
  auto kept = server_->GetJson(one);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->at("ready"), true) << *kept;
  auto served = Infer("/v2/models/fmnist-cascade/infer", 0, 4, "image");
  ASSERT_TRUE(served.ok()) << served.status() << "\n" << server_->Log();
  EXPECT_EQ(served->at("parameters").at("stages")[0].at("vertex"), "fast");

  // gRPC's ModelInfer reaches the same pipeline, and answers as HTTP does.
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  inference::ModelInferRequest request;
  request.set_model_name("fmnist-cascade");
  auto* input = request.add_inputs();
  input->set_name("image");
  input->set_datatype("FP32");
  for (int64_t d : {4, 1, 28, 28}) input->add_shape(d);
  request.add_raw_input_contents(valset_->inputs.data.substr(0, 4 * 28 * 28 * sizeof(float)));
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  grpc::Status status = stub->ModelInfer(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << server_->Log();
  EXPECT_EQ(response.model_name(), "fmnist-cascade");
  const auto& params = response.parameters();
  ASSERT_EQ(params.count("stages"), 1u);
  EXPECT_TRUE(absl::StartsWith(params.at("stages").string_param(), "fast"))
      << params.at("stages").string_param();
  EXPECT_EQ(params.at("fast.rows").int64_param(), 4);
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  const std::string& logits = response.raw_output_contents(0);
  ASSERT_EQ(logits.size(), 4 * 10 * sizeof(float));
  std::vector<Row> http_rows = RowsOf(*served);
  for (int i = 0; i < 4; ++i) {
    const float* row = reinterpret_cast<const float*>(logits.data()) + 10 * i;
    EXPECT_EQ(std::max_element(row, row + 10) - row, http_rows[i].label) << "row " << i;
  }

  // The command line: `maitre pipelines` lists it, `maitre infer
  // --pipeline` serves a validation file through it and names the stages,
  // `maitre pipelines put` reports a bad spec's error.
  const std::string server = absl::StrCat("--server ", server_->url());
  auto [listing, listed_rc] = RunMaitre(absl::StrCat("pipelines ", server));
  EXPECT_EQ(listed_rc, 0) << listing;
  EXPECT_TRUE(absl::StrContains(listing, "fmnist-cascade")) << listing;
  EXPECT_TRUE(absl::StrContains(listing, "fast -> slow")) << listing;
  const std::string four = dir_->path() + "/four.npz";
  ASSERT_TRUE(testing::WriteValsetSlice(*valset_, 4, four).ok());
  auto [inferred, infer_rc] = RunMaitre(
      absl::StrCat("infer ", server, " --pipeline fmnist-cascade --input ", four));
  EXPECT_EQ(infer_rc, 0) << inferred;
  EXPECT_TRUE(absl::StrContains(inferred, "stage    fast (fmnist-logreg:")) << inferred;
  EXPECT_TRUE(absl::StrContains(inferred, "of 4 correct")) << inferred;
  // The Open Inference Protocol's metadata gives the pipeline's inputs, so
  // `maitre bench --pipeline` can shape its queries.
  auto metadata = server_->GetJson("/v2/models/fmnist-cascade");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->at("platform"), "maitre-pipeline");
  EXPECT_EQ(metadata->at("inputs")[0].at("name"), "image");
  // Served a moment ago, both stages are ready: so is the pipeline, over
  // HTTP and gRPC; gRPC's metadata names the pipeline's tensors too.
  auto ready = server_->Get("/v2/models/fmnist-cascade/ready");
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->status, 200) << ready->body;
  {
    grpc::ClientContext ready_context;
    inference::ModelReadyRequest ready_request;
    ready_request.set_name("fmnist-cascade");
    inference::ModelReadyResponse ready_response;
    ASSERT_TRUE(stub->ModelReady(&ready_context, ready_request, &ready_response).ok());
    EXPECT_TRUE(ready_response.ready());
    grpc::ClientContext metadata_context;
    inference::ModelMetadataRequest metadata_request;
    metadata_request.set_name("fmnist-cascade");
    inference::ModelMetadataResponse metadata_response;
    ASSERT_TRUE(stub->ModelMetadata(&metadata_context, metadata_request, &metadata_response).ok());
    EXPECT_EQ(metadata_response.platform(), "maitre-pipeline");
    ASSERT_EQ(metadata_response.inputs_size(), 1);
    EXPECT_EQ(metadata_response.inputs(0).name(), "image");
    EXPECT_EQ(metadata_response.inputs(0).datatype(), "FP32");
    ASSERT_GE(metadata_response.outputs_size(), 1);
  }
  // The pipeline's own queries are counted, apart from its stages'.
  auto metrics = server_->Get("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const std::string served_line =
      "maitre_pipeline_requests_total{pipeline=\"fmnist-cascade\",status=\"ok\"} ";
  const size_t at = metrics->body.find(served_line);
  ASSERT_NE(at, std::string::npos) << metrics->body;
  EXPECT_GE(std::atof(metrics->body.c_str() + at + served_line.size()), 2);
  EXPECT_TRUE(absl::StrContains(metrics->body,
                                "maitre_pipeline_request_seconds_count{pipeline=\"fmnist-cascade\"}"));
  auto [bench, bench_rc] = RunMaitre(absl::StrCat(
      "bench ", server, " --pipeline fmnist-cascade --concurrency 2 --duration 2 --input ", four,
      " --json"));
  ASSERT_EQ(bench_rc, 0) << bench;
  json report = json::parse(bench, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object()) << bench;
  EXPECT_GT(report["requests"]["ok"].get<int64_t>(), 0) << bench;
  EXPECT_EQ(report["requests"]["failed"].get<int64_t>(), 0) << bench;
  std::printf("maitre bench --pipeline, 4-image queries, 2 in flight: %.1f qps, "
              "p50 %.2f ms, p99 %.2f ms\n",
              report.value("throughput_qps", 0.0), report["latency_ms"].value("p50", 0.0),
              report["latency_ms"].value("p99", 0.0));
  json cycle = Cascade();
  cycle["edges"].push_back({{"from", "slow"}, {"to", "fast"}});
  const std::string cycle_path = dir_->path() + "/cycle.json";
  ASSERT_TRUE(WriteFileAtomically(cycle_path, cycle.dump()).ok());
  auto [refused, refused_rc] =
      RunMaitre(absl::StrCat("pipelines put ", server, " ", kApp, " looped ", cycle_path));
  EXPECT_NE(refused_rc, 0) << refused;
  EXPECT_TRUE(absl::StrContains(refused, "HTTP 400: vertex")) << refused;
  EXPECT_TRUE(absl::StrContains(refused, "lies on a cycle")) << refused;

  // A bad query over gRPC is INVALID_ARGUMENT, and the server serves on.
  request.mutable_inputs(0)->set_name("input");
  grpc::ClientContext bad_context;
  status = stub->ModelInfer(&bad_context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "has no input 'input'"))
      << status.error_message();
  ASSERT_TRUE(Infer(one + "/infer", 0, 1, "image").ok());

  auto deleted = Send("DELETE", one);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->status, 200) << deleted->body;
  auto gone =
      Send("POST", one + "/infer", testing::ImagesRequest(*valset_, 0, 1, "image", nullptr));
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, 404) << gone->body;
}

// What /metrics says of scaling actions of `kind` (0 when none yet).
double Actions(ServerProcess& server, const std::string& kind) {
  auto metrics = server.Get("/metrics");
  if (!metrics.ok() || metrics->status != 200) return 0;
  const std::string line = absl::StrCat("maitre_autoscaler_actions_total{action=\"", kind, "\"} ");
  const size_t at = metrics->body.find(line);
  return at == std::string::npos ? 0 : std::atof(metrics->body.c_str() + at + line.size());
}

// Replicas of `model`'s instances serving on workers of `type`, by the
// repository index.
int ServingReplicas(ServerProcess& server, const std::string& model, const std::string& type) {
  auto index = server.RepositoryIndex();
  if (!index.ok()) return 0;
  int replicas = 0;
  for (const json& m : index->value("models", json::array())) {
    if (m.value("name", "") != model) continue;
    for (const json& i : m.value("instances", json::array())) {
      if (i.value("phase", "") == "ready" && i.value("worker_type", "") == type) {
        replicas += i.value("replicas", 0);
      }
    }
  }
  return replicas;
}

// A plan (docs/api.md, "Pipelines", PUT .../plan) is checked, kept and
// provisioned by the control plane; the models a registered pipeline names
// may not be deleted (docs/api.md, "Deleting models and apps").
TEST_F(PipelinesTest, APlanIsProvisionedAndThePipelinesModelsAreKept) {
  const std::string one = absl::StrCat("/v2/apps/", kApp, "/pipelines/fmnist-planned");
  auto put = Send("PUT", one, Cascade().dump());
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_EQ(put->status, 201) << put->body;

  auto in_use = Send("DELETE", absl::StrCat("/v2/apps/", kApp, "/models/fmnist-cnn-wide"));
  ASSERT_TRUE(in_use.ok());
  EXPECT_EQ(in_use->status, 409) << in_use->body;
  EXPECT_TRUE(absl::StrContains(in_use->body, "used by pipeline(s) fmnist-planned"))
      << in_use->body;
  ASSERT_TRUE(server_->GetJson("/v2/models/fmnist-cnn-wide").ok());

  // The slow stage is planned on the model's last variant: its queries go
  // there, whatever selection would choose.
  auto app = server_->GetJson(absl::StrCat("/v2/apps/", kApp));
  ASSERT_TRUE(app.ok()) << app.status();
  std::string planned_variant;
  for (const json& m : (*app)["models"]) {
    if (m["name"] == "fmnist-cnn-wide") planned_variant = m["variants"].back()["variant"];
  }
  ASSERT_FALSE(planned_variant.empty()) << *app;
  // The planning trace's envelope is far below the queries this test
  // sends (one every poll: 10 qps in a 0.1 s window, beyond the planned
  // count's noise), so the tuner scales up. Its envelope is as flat as
  // the mean (no bursts planned for), so r_max, the live rate over the
  // plan's burst at that window times its mean, is the live 10 qps: fast to
  // ceil(10 · 1 / (500 · 0.04)) = 1, slow to
  // ceil(10 · 0.3 / (50 · 0.03)) = 2 replicas of one core each on cpu-1,
  // whose one worker holds one core: the slow stage's second replica needs
  // a load, on another worker the control plane asks for if need be.
  json plan = json::parse(R"({
    "plan": {"stages": [{"stage": "fast", "hardware": "cpu-1", "batch": 1, "replicas": 1},
                        {"stage": "slow", "hardware": "cpu-1", "batch": 1, "replicas": 1}]},
    "tuner": {"windows_s": [0.1, 60], "planned_rates_qps": [0.0001, 0.0001],
              "stages": [{"stage": "fast", "mu_qps": 500, "scale_factor": 1, "rho": 0.04},
                         {"stage": "slow", "mu_qps": 50, "scale_factor": 0.3, "rho": 0.03}]}})");
  plan["plan"]["stages"][1]["variant"] = planned_variant;
  json unknown_stage = plan, unknown_type = plan, negative = plan, unknown_variant = plan;
  unknown_variant["plan"]["stages"][1]["variant"] = "nope";
  unknown_stage["plan"]["stages"][1]["stage"] = "slower";
  unknown_stage["tuner"]["stages"][1]["stage"] = "slower";
  unknown_type["plan"]["stages"][1]["hardware"] = "tpu";
  negative["plan"]["stages"][1]["replicas"] = -1;
  for (const auto& [body, status, message] :
       {std::tuple{unknown_stage, 400, std::string("stage \"slower\": pipeline")},
        {unknown_type, 400, "unknown worker type \"tpu\""},
        {negative, 400, "\"replicas\" must be a whole number"},
        {unknown_variant, 400, "has no variant \"nope\""},
        {json::object(), 400, "needs objects \"plan\" and \"tuner\""}}) {
    auto r = Send("PUT", one + "/plan", body.dump());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, status) << r->body;
    const std::string error = json::parse(r->body).value("error", "");
    EXPECT_TRUE(absl::StrContains(error, message)) << error << " lacks " << message;
  }
  auto no_pipeline =
      Send("PUT", absl::StrCat("/v2/apps/", kApp, "/pipelines/nope/plan"), plan.dump());
  ASSERT_TRUE(no_pipeline.ok());
  EXPECT_EQ(no_pipeline->status, 404) << no_pipeline->body;

  auto applied = Send("PUT", one + "/plan", plan.dump());
  ASSERT_TRUE(applied.ok()) << applied.status();
  ASSERT_EQ(applied->status, 200) << applied->body;
  auto shown = server_->GetJson(one);
  ASSERT_TRUE(shown.ok()) << shown.status();
  EXPECT_EQ(shown->at("plan").at("plan").at("stages")[1].at("replicas"), 1) << *shown;
  EXPECT_EQ(shown->at("plan").at("plan").at("stages")[0].at("hardware"), "cpu-1") << *shown;
  // Queries arrive; the tuner scales up, and the slow stage is held at
  // two serving replicas on cpu-1; it runs on the planned variant.
  std::set<std::string> slow_variants;
  int64_t first = 0;  // images in turn, so some reach the slow stage
  absl::Status tuned = testing::WaitOnProgress([&] {
    auto served = Infer(one + "/infer", first, 4, "image");
    first = (first + 4) % (kImages - 4);
    if (served.ok()) {
      for (const json& stage : (*served)["parameters"]["stages"]) {
        if (stage["vertex"] == "slow") slow_variants.insert(stage["variant"]);
      }
    }
    const double ups = Actions(*server_, "pipeline-up");
    const int slow = ServingReplicas(*server_, "fmnist-cnn-wide", "cpu-1");
    return testing::Progress{
        served.ok() && ups >= 1 && slow >= 2 && !slow_variants.empty(),
        absl::StrCat(served.ok() ? "served" : served.status().ToString(), "; ", ups,
                     " scale-ups, ", Actions(*server_, "pipeline-add-worker"),
                     " workers asked for, ", Actions(*server_, "pipeline-load"), " loads, ", slow,
                     " slow replicas, the slow stage ran ", slow_variants.size(), " variants")};
  });
  EXPECT_TRUE(tuned.ok()) << tuned << "\n" << server_->Log();
  EXPECT_EQ(slow_variants, std::set<std::string>{planned_variant});
  // The plan's batch (1) reached the workers serving the slow stage: each
  // logs the cap it loaded the variant with, or a later load's.
  const std::string slow_key = "fmnist-cnn-wide:" + planned_variant;
  int capped = 0, uncapped = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_->path() + "/data/logs")) {
    auto text = ReadFileToString(entry.path().string());
    if (!text.ok()) continue;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      if (!absl::StrContains(line, slow_key + " ")) continue;
      if (absl::StrContains(line, "(") && absl::StrContains(line, "batching")) {
        (absl::EndsWith(line, " up to 1)") ? capped : uncapped) += 1;
      } else if (absl::StrContains(line, " now batches up to ")) {
        (absl::EndsWith(line, " up to 1") ? capped : uncapped) += 1;
      }
    }
  }
  EXPECT_GE(capped, 1) << uncapped << " loads of " << slow_key << " without the plan's cap";
  // What served traffic says of the branch, as GET shows it.
  auto measured = server_->GetJson(one);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const json& m = measured->at("measured");
  EXPECT_GT(m.at("rows").get<int64_t>(), 0) << m;
  EXPECT_EQ(m.at("stages").at("fast").at("scale_factor"), 1.0) << m;
  const double branch = m.at("branches").at("fast->slow").get<double>();
  EXPECT_GT(branch, 0) << m;
  EXPECT_LT(branch, 1) << m;
  EXPECT_DOUBLE_EQ(m.at("stages").at("slow").at("scale_factor").get<double>(), branch) << m;

  // `maitre plan --from` plans from what the server holds: the spec, the
  // models' profiles, the applied plan's variant for the slow stage, and
  // the measured branch. It waits for the models' profiles. The fast
  // stage's model has several variants and no planned one: a try names
  // them, and the next picks the first.
  // The server reports the serving path per stage once 40 queries were
  // answered; the tuner's run above may have sent fewer.
  json measured_now;
  absl::Status enough = testing::WaitOnProgress([&] {
    auto served = Infer(one + "/infer", first, 4, "image");
    first = (first + 4) % (kImages - 4);
    auto shown = server_->GetJson(one);
    if (shown.ok()) measured_now = shown->at("measured");
    return testing::Progress{measured_now.contains("stage_overhead_ms"),
                             absl::StrCat(measured_now.value("rows", 0), " rows answered; ",
                                          served.ok() ? "" : served.status().ToString())};
  });
  ASSERT_TRUE(enough.ok()) << enough;
  const std::string trace_path = dir_->path() + "/plan-trace.csv";
  std::string trace = "arrival_ms\n";
  for (int i = 0; i < 200; ++i) absl::StrAppend(&trace, i * 10, "\n");
  ASSERT_TRUE(WriteFileAtomically(trace_path, trace).ok());
  const std::string plan_args =
      absl::StrCat("plan --from ", server_->url(), " --app ", kApp,
                   " --pipeline fmnist-planned --trace ", trace_path, " --slo-ms 200 --json");
  std::string planned, variant_flag;
  int plan_rc = -1;
  absl::Status plan_made = testing::WaitOnProgress([&] {
    std::tie(planned, plan_rc) = RunMaitre(plan_args + variant_flag);
    const std::string listed = "fmnist-logreg is profiled as variants ";
    if (const size_t at = planned.find(listed); plan_rc != 0 && at != std::string::npos) {
      const size_t from = at + listed.size();
      variant_flag = absl::StrCat(" --variant fmnist-logreg=",
                                  planned.substr(from, planned.find_first_of(",;", from) - from));
    }
    auto profiles = Send("GET", absl::StrCat("/v2/profiles?app=", kApp));
    return testing::Progress{
        plan_rc == 0 || !absl::StrContains(planned, "has no profile on the server yet"),
        absl::StrCat(planned, " (", profiles.ok() ? profiles->body.size() : 0,
                     " bytes of profiles)")};
  });
  ASSERT_TRUE(plan_made.ok()) << plan_made;
  if (plan_rc != 0 && !variant_flag.empty()) {
    std::tie(planned, plan_rc) = RunMaitre(plan_args + variant_flag);
  }
  ASSERT_EQ(plan_rc, 0) << planned;
  json from_server = json::parse(planned, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(from_server.is_object()) << planned;
  // The branch and the serving path per stage the server measured on its
  // answers (no query was sent since).
  EXPECT_NEAR(from_server["branches"]["fast->slow"].get<double>(),
              measured_now["branches"]["fast->slow"].get<double>(), 1e-9)
      << planned;
  EXPECT_TRUE(from_server["stage_overhead_measured"].get<bool>()) << planned;
  EXPECT_NEAR(from_server["stage_overhead_ms"].get<double>(),
              measured_now["stage_overhead_ms"].get<double>(), 1e-9)
      << planned;
  std::printf("maitre plan --from: branch fast->slow %.3f, stage overhead %.3f ms over %d "
              "queries\n",
              from_server["branches"]["fast->slow"].get<double>(),
              from_server["stage_overhead_ms"].get<double>(),
              measured_now.value("stage_overhead_queries", 0));
  for (const json& stage : from_server["plan"]["stages"]) {
    if (stage["stage"] != "slow") continue;
    EXPECT_EQ(stage["variant"], planned_variant) << planned;
    EXPECT_NEAR(stage["scale_factor"].get<double>(),
                measured_now["branches"]["fast->slow"].get<double>(), 1e-9)
        << planned;
  }

  auto deleted = Send("DELETE", one);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->status, 200) << deleted->body;
}

}  // namespace
}  // namespace maitre
