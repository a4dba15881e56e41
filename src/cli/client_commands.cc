#include "cli/client_commands.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/api_client.h"
#include "core/text_table.h"
#include "core/file_util.h"
#include "core/json_text.h"
#include "core/status_macros.h"
#include "http/multipart.h"
#include "core/npz.h"

namespace maitre::cli {
namespace {

using nlohmann::json;

// "input:FP32:-1,1,28,28" -> {"name","datatype","shape"}.
absl::StatusOr<json> ParseTensorFlag(const std::string& flag) {
  std::vector<std::string> f = absl::StrSplit(flag, ':');
  if (f.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad tensor spec \"", flag, "\"; expected NAME:DTYPE:SHAPE, e.g. "
                     "input:FP32:-1,1,28,28"));
  }
  json shape = json::array();
  for (absl::string_view d : absl::StrSplit(f[2], ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(d, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("bad dimension \"", d, "\" in ", flag));
    }
    shape.push_back(v);
  }
  return json{{"name", f[0]}, {"datatype", absl::AsciiStrToUpper(f[1])}, {"shape", shape}};
}

absl::StatusOr<std::string> BuildMeta(const RegisterArgs& args) {
  if (!args.meta.empty()) return ReadFileToString(args.meta);
  std::string format = args.format;
  if (format.empty()) format = absl::EndsWith(args.model, ".onnx") ? "onnx" : "torchscript";
  if (args.inputs.empty() || args.outputs.empty()) {
    return absl::InvalidArgumentError(
        "describe the model with --meta FILE, or with --input and --output "
        "(NAME:DTYPE:SHAPE, e.g. --input input:FP32:-1,1,28,28 --output logits:FP32:-1,10)");
  }
  json meta{{"format", format}, {"inputs", json::array()}, {"outputs", json::array()}};
  for (const std::string& i : args.inputs) {
    MAITRE_ASSIGN_OR_RETURN(json t, ParseTensorFlag(i));
    meta["inputs"].push_back(t);
  }
  for (const std::string& o : args.outputs) {
    MAITRE_ASSIGN_OR_RETURN(json t, ParseTensorFlag(o));
    meta["outputs"].push_back(t);
  }
  if (args.accuracy >= 0) meta["accuracy"] = args.accuracy;
  return meta.dump();
}

// JSON "data" for one tensor of a v2 request, written by the same core
// writer as the load generator's requests (the CLI sends one request, so
// reading the text back into a json value costs nothing that matters). A
// type with no JSON form (FP16) is sent as zeros, as before, and the server
// answers why it refuses them.
json TensorData(const Tensor& t) {
  std::string text;
  if (AppendJsonData(&text, t)) return json::parse(text);
  return json(std::vector<int>(static_cast<size_t>(std::max<int64_t>(0, t.NumElements())), 0));
}

// The names of the inputs the query's target takes: the model's, or those of
// the app's first model (as `maitre bench` reads them).
absl::StatusOr<std::vector<std::string>> TargetInputNames(ApiClient& api, const InferArgs& args) {
  std::vector<std::string> names;
  if (!args.pipeline.empty()) {
    MAITRE_ASSIGN_OR_RETURN(json listed, api.Get("/v2/pipelines"));
    for (const json& p : listed.value("pipelines", json::array())) {
      if (p.value("name", "") != args.pipeline) continue;
      for (const json& input : p.value("inputs", json::array())) {
        names.push_back(input.value("name", ""));
      }
    }
    return names;
  }
  MAITRE_ASSIGN_OR_RETURN(json target,
                          api.Get(args.app.empty() ? absl::StrCat("/v2/models/", args.model)
                                                   : absl::StrCat("/v2/apps/", args.app)));
  const json models = target.value("models", json::array());
  if (!args.app.empty() && (!models.is_array() || models.empty())) return names;
  const json& model = args.app.empty() ? target : models[0];
  for (const json& input : model.value("inputs", json::array())) {
    names.push_back(input.value("name", ""));
  }
  return names;
}

// A v2 request body from an input file: a .json request as it is, or the
// arrays of a .npz (all but "labels", which is returned for comparison). A
// lone array (a validation set's "inputs") takes the name of the target's
// lone input: the server does not guess which input a misnamed tensor is.
absl::StatusOr<std::string> RequestBody(ApiClient& api, const InferArgs& args,
                                        std::vector<int64_t>* labels) {
  MAITRE_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(args.input));
  json request;
  if (absl::EndsWith(args.input, ".json")) {
    request = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
    if (request.is_discarded() || !request.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(args.input, " is not a JSON object"));
    }
  } else {
    MAITRE_ASSIGN_OR_RETURN(auto arrays, ParseNpz(bytes));
    request["inputs"] = json::array();
    for (const auto& [name, tensor] : arrays) {
      if (name == "labels") {
        if (tensor.dtype == DataType::kInt64) {
          labels->assign(tensor.As<int64_t>(), tensor.As<int64_t>() + tensor.NumElements());
        }
        continue;
      }
      request["inputs"].push_back({{"name", name},
                                   {"datatype", std::string(DataTypeName(tensor.dtype))},
                                   {"shape", tensor.shape},
                                   {"data", TensorData(tensor)}});
    }
    if (request["inputs"].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(args.input, " holds no input arrays"));
    }
    if (request["inputs"].size() == 1) {
      MAITRE_ASSIGN_OR_RETURN(std::vector<std::string> names, TargetInputNames(api, args));
      if (names.size() == 1) request["inputs"][0]["name"] = names[0];
    }
  }
  json& params = request["parameters"];
  if (!params.is_object()) params = json::object();
  if (args.latency_ms > 0) params["latency_ms"] = args.latency_ms;
  if (args.min_accuracy >= 0) params["min_accuracy"] = args.min_accuracy;
  if (args.max_cost >= 0) params["max_cost"] = args.max_cost;
  return request.dump();
}

// `app` alone, or every app on the server when it is empty.
absl::StatusOr<std::vector<std::string>> AppNames(ApiClient& api, const std::string& app) {
  if (!app.empty()) return std::vector<std::string>{app};
  MAITRE_ASSIGN_OR_RETURN(json list, api.Get("/v2/apps"));
  std::vector<std::string> names;
  for (const json& a : list["apps"]) names.push_back(a["name"]);
  return names;
}

}  // namespace

int RunRegister(const RegisterArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto meta = BuildMeta(args);
  if (!meta.ok()) return Fail(meta.status());
  std::vector<http::Part> parts;
  auto model = ReadFileToString(args.model);
  if (!model.ok()) return Fail(model.status());
  parts.push_back({"model", args.model, "application/octet-stream", *std::move(model)});
  parts.push_back({"meta", "meta.json", "application/json", *std::move(meta)});
  for (const auto& [name, path] : {std::pair{"valset", args.valset}, {"onnx", args.onnx}}) {
    if (path.empty()) continue;
    auto bytes = ReadFileToString(path);
    if (!bytes.ok()) return Fail(bytes.status());
    parts.push_back({name, path, "application/octet-stream", *std::move(bytes)});
  }
  std::string content_type;
  std::string body = http::EncodeMultipart(parts, &content_type);
  std::string model_path = absl::StrCat("/v2/apps/", args.app, "/models/", args.name);
  auto accepted = api->Send("POST", model_path + "?wait=false", std::move(body), content_type);
  if (!accepted.ok()) return Fail(accepted.status());
  if (accepted->status != 202) {
    json j = json::parse(accepted->body, nullptr, false);
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "HTTP ", accepted->status, ": ",
        j.is_object() && j.contains("error") ? j["error"].get<std::string>() : accepted->body)));
  }
  // The server validates on a worker; show where it is until the model can
  // serve.
  json progress;
  while (true) {
    auto p = api->Get(model_path + "/registration");
    if (!p.ok()) return Fail(p.status());
    progress = *p;
    int step = progress.value("step", 0), steps = std::max(1, progress.value("steps", 1));
    int filled = 30 * step / steps;
    if (!args.json) {
      std::cerr << "\r[" << std::string(filled, '#') << std::string(30 - filled, ' ') << "] "
                << step << "/" << steps << " " << progress.value("phase", "")
                << std::string(20, ' ') << std::flush;
    }
    if (progress.value("done", false)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!args.json) std::cerr << "\n";
  if (progress.contains("error")) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("HTTP ", progress.value("status", 400),
                                                        ": ", progress["error"].get<std::string>())));
  }
  auto app = api->Get(absl::StrCat("/v2/apps/", args.app));
  if (!app.ok()) return Fail(app.status());
  json registered;
  for (const json& m : (*app)["models"]) {
    if (m["name"] == args.name) registered = m;
  }
  if (args.json) {
    std::cout << registered.dump(2) << "\n";
    return 0;
  }
  std::cout << "registered " << args.app << "/" << args.name << "; it can serve now\n";
  Table table({"VARIANT", "RUNTIME", "ACCURACY", "SOURCE", "STATE"});
  for (const json& v : registered["variants"]) {
    std::string state = v["state"];
    if (!v["detail"].get<std::string>().empty()) state += ": " + v["detail"].get<std::string>();
    table.Add({v["variant"], v["runtime"], absl::StrFormat("%.4f", v["accuracy"].get<double>()),
               v["accuracy_source"], state});
  }
  std::cout << table.Render()
            << "Other variants are generated and profiled in the background; follow them with\n"
            << "  maitre variants --app " << args.app << "\n";
  return 0;
}

int RunVariants(const VariantsArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto apps = AppNames(*api, args.app);
  if (!apps.ok()) return Fail(apps.status());
  if (args.csv) {
    auto csv = api->Send("GET", absl::StrCat("/v2/profiles?app=", args.app), "", "");
    if (!csv.ok()) return Fail(csv.status());
    std::cout << csv->body;
    return csv->status == 200 ? 0 : 1;
  }
  for (const std::string& app : *apps) {
    std::string path = absl::StrCat("/v2/apps/", app, args.json ? "" : "?format=table");
    auto response = api->Send("GET", path, "", "");
    if (!response.ok()) return Fail(response.status());
    if (response->status != 200) {
      return Fail(absl::NotFoundError(absl::StrCat("HTTP ", response->status, ": ", response->body)));
    }
    if (apps->size() > 1 && !args.json) std::cout << "app " << app << "\n";
    std::cout << response->body << (args.json ? "\n" : "");
  }
  return 0;
}

int RunProfilesImport(const ProfilesArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto csv = ReadFileToString(args.file);
  if (!csv.ok()) return Fail(csv.status());
  auto result = api->Post("/v2/profiles", *std::move(csv), "text/csv");
  if (!result.ok()) return Fail(result.status());
  std::cout << "imported " << (*result)["imported"].get<int>() << " profiles\n";
  return 0;
}

int RunProfilesExport(const ProfilesArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto csv = api->Send("GET", absl::StrCat("/v2/profiles?app=", args.app), "", "");
  if (!csv.ok()) return Fail(csv.status());
  if (args.file.empty() || args.file == "-") {
    std::cout << csv->body;
    return 0;
  }
  absl::Status written = WriteFileAtomically(args.file, csv->body);
  return written.ok() ? 0 : Fail(written);
}

int RunInfer(const InferArgs& args) {
  if (args.model.empty() + args.app.empty() + args.pipeline.empty() != 2) {
    return Fail(absl::InvalidArgumentError("give exactly one of --model, --app or --pipeline"));
  }
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  std::vector<int64_t> labels;
  auto body = RequestBody(*api, args, &labels);
  if (!body.ok()) return Fail(body.status());
  // The Open Inference Protocol's route reaches a pipeline by its name.
  std::string path = !args.app.empty() ? absl::StrCat("/v2/apps/", args.app, "/infer")
                     : !args.pipeline.empty()
                         ? absl::StrCat("/v2/models/", args.pipeline, "/infer")
                         : absl::StrCat("/v2/models/", args.model, "/infer");
  auto result = api->Post(path, *std::move(body));
  if (!result.ok()) return Fail(result.status());
  if (args.json) {
    std::cout << result->dump(2) << "\n";
    return 0;
  }
  const json& p = (*result)["parameters"];
  if (p.contains("stages")) {
    std::cout << "pipeline " << p.value("pipeline", "") << ", total " << p.value("total_us", 0)
              << " us\n";
    for (const json& s : p["stages"]) {
      std::cout << absl::StrFormat(
          "stage    %s (%s:%s on %s): %d rows, %d-%d us (queue %d us, compute %d us)\n",
          s.value("vertex", ""), s.value("model", ""), s.value("variant", ""),
          s.value("worker", ""), s.value("rows", 0), s.value("started_us", 0),
          s.value("finished_us", 0), s.value("queue_us", 0), s.value("compute_us", 0));
    }
    for (const json& skipped : p.value("skipped", json::array())) {
      std::cout << "skipped  " << skipped.get<std::string>() << "\n";
    }
  } else {
    std::cout << "model    " << (*result)["model_name"].get<std::string>() << "\n"
              << "variant  " << (*result)["model_version"].get<std::string>() << "\n"
              << "worker   " << p.value("worker", "") << " (" << p.value("worker_type", "")
              << ")\n"
              << absl::StrFormat("timings  queue %d us, compute %d us, total %d us, batch %d\n",
                                 p.value("queue_us", 0), p.value("compute_us", 0),
                                 p.value("total_us", 0), p.value("batch_size", 0));
  }
  for (const json& out : (*result)["outputs"]) {
    std::vector<int64_t> shape = out["shape"];
    std::cout << "output   " << out["name"].get<std::string>() << " " << out["shape"].dump()
              << " " << out["datatype"].get<std::string>() << "\n";
    if (shape.size() != 2 || !out["data"].is_array()) continue;
    // Scores per row: show the top-1 class, and the label when known.
    int correct = 0;
    for (int64_t r = 0; r < shape[0]; ++r) {
      int64_t best = 0;
      double best_score = -1e300;
      for (int64_t c = 0; c < shape[1]; ++c) {
        const json& v = out["data"][r * shape[1] + c];
        double score = v.is_number() ? v.get<double>() : -1e300;
        if (score > best_score) {
          best_score = score;
          best = c;
        }
      }
      std::cout << "  row " << r << ": class " << best;
      if (r < static_cast<int64_t>(labels.size())) {
        std::cout << " (label " << labels[r] << ")";
        correct += labels[r] == best ? 1 : 0;
      }
      std::cout << "\n";
    }
    if (!labels.empty()) {
      std::cout << absl::StrFormat("  %d of %d correct\n", correct, shape[0]);
    }
  }
  return 0;
}

int RunApps(const ListArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  if (args.latency_ms >= 0 || args.min_accuracy >= 0 || args.max_cost >= 0 ||
      args.max_accuracy_drop >= 0 || args.sl_min >= 0) {
    if (args.app.empty()) return Fail(absl::InvalidArgumentError("setting defaults needs --app"));
    json defaults = json::object();
    if (args.latency_ms >= 0) defaults["latency_ms"] = args.latency_ms;
    if (args.min_accuracy >= 0) defaults["min_accuracy"] = args.min_accuracy;
    if (args.max_cost >= 0) defaults["max_cost"] = args.max_cost;
    if (args.max_accuracy_drop >= 0) defaults["max_accuracy_drop"] = args.max_accuracy_drop;
    if (args.sl_min >= 0) defaults["sl_min"] = args.sl_min;  // 0 is refused by the server
    auto set = api->Send("PUT", absl::StrCat("/v2/apps/", args.app), defaults.dump(),
                         "application/json");
    if (!set.ok()) return Fail(set.status());
    if (set->status != 200) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("HTTP ", set->status, ": ", set->body)));
    }
  }
  auto apps = api->Get("/v2/apps");
  if (!apps.ok()) return Fail(apps.status());
  if (args.json) {
    std::cout << apps->dump(2) << "\n";
    return 0;
  }
  Table table({"APP", "MODELS", "DEFAULTS"});
  for (const json& app : (*apps)["apps"]) {
    table.Add({app["name"], std::to_string(app["models"].size()), app["defaults"].dump()});
  }
  std::cout << table.Render();
  return 0;
}

int RunModels(const ListArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto apps = AppNames(*api, args.app);
  if (!apps.ok()) return Fail(apps.status());
  json all = json::array();
  Table table({"MODEL", "APP", "FORMAT", "VARIANTS", "BEST ACCURACY", "READY"});
  for (const std::string& app_name : *apps) {
    auto app = api->Get(absl::StrCat("/v2/apps/", app_name));
    if (!app.ok()) return Fail(app.status());
    for (json& model : (*app)["models"]) {
      double best = 0;
      int ready = 0;
      for (const json& v : model["variants"]) {
        best = std::max(best, v["accuracy"].get<double>());
        ready += v["state"] == "ready" ? 1 : 0;
      }
      table.Add({model["name"], app_name, model["format"],
                 std::to_string(model["variants"].size()), absl::StrFormat("%.4f", best),
                 absl::StrCat(ready, "/", model["variants"].size())});
      model["app"] = app_name;
      all.push_back(model);
    }
  }
  if (args.json) {
    std::cout << all.dump(2) << "\n";
  } else {
    std::cout << table.Render();
  }
  return 0;
}

int RunDelete(const DeleteArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  std::string path = absl::StrCat("/v2/apps/", args.app);
  if (!args.model.empty()) absl::StrAppend(&path, "/models/", args.model);
  if (args.force) absl::StrAppend(&path, "?force=true");
  auto deleted = api->Send("DELETE", path, "", "");
  if (!deleted.ok()) return Fail(deleted.status());
  json j = json::parse(deleted->body, nullptr, false);
  if (deleted->status != 200) {
    std::string why = j.is_object() && j.contains("error") ? j["error"].get<std::string>()
                                                           : deleted->body;
    return Fail(absl::UnknownError(absl::StrCat("HTTP ", deleted->status, ": ", why)));
  }
  if (args.json || j.is_discarded()) {
    std::cout << (j.is_discarded() ? deleted->body : j.dump(2)) << "\n";
    return 0;
  }
  std::cout << "deleted " << (args.model.empty() ? "app " + args.app : "model " + args.model)
            << ": " << j["models"].size() << " model(s), " << j["variants"].size()
            << " variant(s), " << j["unloading"].size() << " instance(s) unloading, "
            << j["blobs_removed"].get<int>() << " file(s) removed ("
            << j["bytes_freed"].get<int64_t>() << " bytes)\n";
  return 0;
}

}  // namespace maitre::cli
