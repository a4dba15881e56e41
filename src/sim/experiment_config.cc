#include "sim/experiment_config.h"

#include <cmath>
#include <memory>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/price_trace.h"
#include "core/profile_csv.h"
#include "core/status_macros.h"
#include "core/worker_type.h"
#include "policy/prediction/workload_prediction.h"
#include "sim/experiment_yaml.h"
#include "yaml-cpp/yaml.h"

namespace maitre::sim {
namespace {

using experiment_yaml::AsNumber;
using experiment_yaml::Bad;
using experiment_yaml::CheckMap;
using experiment_yaml::Item;
using experiment_yaml::Key;
using experiment_yaml::Present;
using experiment_yaml::ReadInt;
using experiment_yaml::ReadMillis;
using experiment_yaml::ReadNumber;
using experiment_yaml::ReadNumberList;
using experiment_yaml::ReadSeconds;
using experiment_yaml::ReadString;
using experiment_yaml::Resolve;

class Parser {
 public:
  explicit Parser(std::string base_dir) : base_dir_(std::move(base_dir)) {}

  absl::StatusOr<Experiment> Parse(const YAML::Node& root) {
    MAITRE_RETURN_IF_ERROR(
        CheckMap(root, "experiment",
                 {"name", "cluster", "profiles", "apps", "trace", "policies", "pipelines",
                  "simulation"}));
    exp_.name = "experiment";
    MAITRE_RETURN_IF_ERROR(ReadString(root, "", "name", &exp_.name));
    MAITRE_RETURN_IF_ERROR(ParseWorkerTypes(root["cluster"]));
    MAITRE_RETURN_IF_ERROR(ParseProfiles(root["profiles"]));
    MAITRE_RETURN_IF_ERROR(ParseReplicaCores(root["cluster"]));
    MAITRE_RETURN_IF_ERROR(ParseApps(root["apps"]));
    MAITRE_RETURN_IF_ERROR(ParseWorkerCounts(root["cluster"]));
    MAITRE_RETURN_IF_ERROR(ParseTrace(root["trace"]));
    MAITRE_RETURN_IF_ERROR(experiment_yaml::ParsePolicies(root["policies"], exp_.setup));
    MAITRE_RETURN_IF_ERROR(
        experiment_yaml::ParsePipelines(root["pipelines"], base_dir_, exp_.setup));
    MAITRE_RETURN_IF_ERROR(ParseSimulation(root["simulation"]));
    for (size_t i = 0; i < exp_.setup.worker_types.size(); ++i) {
      const WorkerType& t = exp_.setup.worker_types[i].type;
      if (t.price_trace == nullptr) continue;
      if (absl::Status covers = t.price_trace->CheckCovers(exp_.setup.horizon); !covers.ok()) {
        return Bad(Key(Item("cluster.worker_types", i), "price_trace"), covers.message());
      }
    }
    MAITRE_RETURN_IF_ERROR(FillOraclePeaks());
    if (exp_.setup.routing != "selection") {
      // A static cluster serves an app only through the instances it lists.
      for (size_t a = 0; a < exp_.setup.apps.size(); ++a) {
        bool has = false;
        for (const SimInstanceSpec& i : exp_.setup.instances)
          has |= i.app == static_cast<int32_t>(a);
        if (!has) {
          return Bad(Key(Item("apps", a), "instances"),
                     "expected a non-empty list of {variant, worker_type, count} (or routing: "
                     "selection, which loads variants itself)");
        }
      }
    }
    return std::move(exp_);
  }

 private:
  // The mark allocator's "oracle" predictor reads each app's true unit
  // peaks, from this very trace. The allocator's units start at its first
  // model round, so the trace is read from there.
  absl::Status FillOraclePeaks() {
    ControlSetup& c = exp_.setup.control;
    if (c.allocator != "mark" || c.mark.predictor != "oracle") return absl::OkStatus();
    std::vector<std::vector<Nanos>> times(exp_.setup.apps.size());
    MAITRE_ASSIGN_OR_RETURN(std::unique_ptr<ArrivalSource> arrivals, exp_.MakeArrivals());
    const Nanos origin = c.model_interval;
    for (Arrival a; arrivals->Next(&a);) {
      if (a.app >= 0 && a.app < static_cast<int32_t>(times.size()) && a.time >= origin) {
        times[static_cast<size_t>(a.app)].push_back(a.time - origin);
      }
    }
    for (size_t app = 0; app < times.size(); ++app) {
      c.mark.known_peaks[exp_.setup.apps[app].name] =
          policy::UnitPeakRates(times[app], c.mark.windows, exp_.setup.horizon - origin);
    }
    return absl::OkStatus();
  }

  int32_t WorkerTypeIndex(const std::string& name) const {
    return experiment_yaml::WorkerTypeIndex(exp_.setup, name);
  }

  absl::Status ParseWorkerTypes(const YAML::Node& cluster) {
    const std::string path = "cluster";
    if (Present(cluster)) {
      MAITRE_RETURN_IF_ERROR(
          CheckMap(cluster, path, {"worker_types", "workers", "replica_cores"}));
    }
    YAML::Node list = Present(cluster) ? cluster["worker_types"] : YAML::Node();
    if (!Present(list)) {
      const WorkerTypeTable defaults = WorkerTypeTable::Default();
      for (const WorkerType& t : defaults.types()) {
        exp_.setup.worker_types.push_back({t, 0});
      }
      return absl::OkStatus();
    }
    const std::string lp = Key(path, "worker_types");
    if (!list.IsSequence() || list.size() == 0) return Bad(lp, "expected a non-empty list");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string ip = Item(lp, i);
      MAITRE_RETURN_IF_ERROR(CheckMap(list[i], ip,
                                      {"name", "cores", "memory_mb", "price_per_hour", "launch_s",
                                       "billing_s", "max_workers", "memory_cost_per_gb_s",
                                       "market", "price_trace"}));
      WorkerType t;
      int64_t cores = 1, memory = 0, max_workers = 8;
      Nanos launch = 0;
      MAITRE_RETURN_IF_ERROR(ReadString(list[i], ip, "name", &t.name, true));
      MAITRE_RETURN_IF_ERROR(ReadInt(list[i], ip, "cores", &cores));
      MAITRE_RETURN_IF_ERROR(ReadInt(list[i], ip, "memory_mb", &memory));
      MAITRE_RETURN_IF_ERROR(ReadNumber(list[i], ip, "price_per_hour", &t.price_per_hour, true));
      MAITRE_RETURN_IF_ERROR(ReadSeconds(list[i], ip, "launch_s", &launch));
      MAITRE_RETURN_IF_ERROR(ReadSeconds(list[i], ip, "billing_s", &t.billing_unit));
      if (t.billing_unit < 0) return Bad(Key(ip, "billing_s"), "must be >= 0 (0: by the second)");
      MAITRE_RETURN_IF_ERROR(ReadInt(list[i], ip, "max_workers", &max_workers));
      double memory_cost = 0;
      MAITRE_RETURN_IF_ERROR(ReadNumber(list[i], ip, "memory_cost_per_gb_s", &memory_cost));
      if (!(memory_cost >= 0)) return Bad(Key(ip, "memory_cost_per_gb_s"), "must be >= 0");
      if (cores < 1 || memory < 0 || t.price_per_hour < 0 || launch < 0 || max_workers < 0 ||
          max_workers > 100000) {
        return Bad(ip,
                   "needs cores >= 1, memory_mb >= 0, price_per_hour >= 0, launch_s >= 0 and "
                   "max_workers >= 0");
      }
      if (WorkerTypeIndex(t.name) >= 0) return Bad(Key(ip, "name"), "duplicate worker type");
      MAITRE_RETURN_IF_ERROR(ParseMarket(list[i], ip, t));
      t.cores = static_cast<int>(cores);
      t.memory_mb = memory;
      exp_.setup.worker_types.push_back(
          {t, 0, launch, static_cast<int32_t>(max_workers), memory_cost});
    }
    return absl::OkStatus();
  }

  // A worker type's market and, for spot, its price trace (resolved
  // against this file; its span is checked against the run in Parse).
  absl::Status ParseMarket(const YAML::Node& n, const std::string& path, WorkerType& t) {
    std::string market = "on-demand", trace;
    MAITRE_RETURN_IF_ERROR(ReadString(n, path, "market", &market));
    MAITRE_RETURN_IF_ERROR(ReadString(n, path, "price_trace", &trace));
    if (market != "on-demand" && market != "spot") {
      return Bad(Key(path, "market"), "expected on-demand or spot");
    }
    if (market == "spot") t.market = WorkerType::Market::kSpot;
    if (trace.empty()) return absl::OkStatus();
    if (t.market != WorkerType::Market::kSpot) {
      return Bad(Key(path, "price_trace"), "only a spot type's price follows a trace");
    }
    absl::StatusOr<PriceTrace> loaded = PriceTrace::Load(Resolve(base_dir_, trace));
    if (!loaded.ok()) return Bad(Key(path, "price_trace"), loaded.status().message());
    t.price_trace = std::make_shared<const PriceTrace>(*std::move(loaded));
    return absl::OkStatus();
  }

  absl::Status AddVariant(ProfileRecord record, const std::string& path) {
    int32_t type = WorkerTypeIndex(record.worker_type);
    if (type < 0) {
      return Bad(path, absl::StrCat("worker type \"", record.worker_type,
                                    "\" is not in cluster.worker_types"));
    }
    for (const SimVariant& v : exp_.setup.variants) {
      if (v.key == record.key && v.worker_type == type) {
        return Bad(path, absl::StrCat("a second profile for ", record.key.ToString(), " on ",
                                      record.worker_type));
      }
    }
    exp_.setup.variants.push_back({record.key, type, record.accuracy, std::move(record.profile)});
    return absl::OkStatus();
  }

  absl::Status ParseProfiles(const YAML::Node& list) {
    const std::string path = "profiles";
    if (!Present(list) || !list.IsSequence() || list.size() == 0) {
      return Bad(path, "expected a non-empty list of profiles (csv: FILE, or inline)");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string ip = Item(path, i);
      const YAML::Node& n = list[i];
      if (n.IsMap() && Present(n["csv"])) {
        MAITRE_RETURN_IF_ERROR(ParseProfileCsvFile(n, ip));
      } else {
        MAITRE_RETURN_IF_ERROR(ParseInlineProfile(n, ip));
      }
    }
    return absl::OkStatus();
  }

  // profiles[i] as {csv: FILE}: every profile in the file.
  absl::Status ParseProfileCsvFile(const YAML::Node& n, const std::string& ip) {
    MAITRE_RETURN_IF_ERROR(CheckMap(n, ip, {"csv"}));
    std::string file;
    MAITRE_RETURN_IF_ERROR(ReadString(n, ip, "csv", &file, true));
    auto text = ReadFileToString(Resolve(base_dir_, file));
    if (!text.ok()) return Bad(Key(ip, "csv"), text.status().message());
    auto records = ParseProfileCsv(*text);
    if (!records.ok())
      return Bad(Key(ip, "csv"), absl::StrCat(file, ": ", records.status().message()));
    for (ProfileRecord& r : *records) MAITRE_RETURN_IF_ERROR(AddVariant(std::move(r), ip));
    return absl::OkStatus();
  }

  // profiles[i] written out: one variant on one worker type, with its points.
  absl::Status ParseInlineProfile(const YAML::Node& n, const std::string& ip) {
    MAITRE_RETURN_IF_ERROR(CheckMap(
        n, ip, {"model", "variant", "worker_type", "accuracy", "load_ms", "memory_mb", "points"}));
    ProfileRecord r;
    double load_ms = 0, memory_mb = 0;
    MAITRE_RETURN_IF_ERROR(ReadString(n, ip, "model", &r.key.model, true));
    MAITRE_RETURN_IF_ERROR(ReadString(n, ip, "variant", &r.key.variant, true));
    MAITRE_RETURN_IF_ERROR(ReadString(n, ip, "worker_type", &r.worker_type, true));
    MAITRE_RETURN_IF_ERROR(ReadNumber(n, ip, "accuracy", &r.accuracy));
    MAITRE_RETURN_IF_ERROR(ReadNumber(n, ip, "load_ms", &load_ms));
    MAITRE_RETURN_IF_ERROR(ReadNumber(n, ip, "memory_mb", &memory_mb));
    const std::string pp = Key(ip, "points");
    YAML::Node points = n["points"];
    if (!Present(points) || !points.IsSequence() || points.size() == 0) {
      return Bad(pp, "expected a list of [batch, p50_ms, p99_ms]");
    }
    std::vector<LatencyPoint> parsed;
    for (size_t k = 0; k < points.size(); ++k) {
      const std::string kp = Item(pp, k);
      if (!points[k].IsSequence() || points[k].size() != 3) {
        return Bad(kp, "expected [batch, p50_ms, p99_ms]");
      }
      MAITRE_ASSIGN_OR_RETURN(double batch, AsNumber(points[k][0], kp));
      MAITRE_ASSIGN_OR_RETURN(double p50, AsNumber(points[k][1], kp));
      MAITRE_ASSIGN_OR_RETURN(double p99, AsNumber(points[k][2], kp));
      if (batch != std::floor(batch) || batch < 1 || batch > 1e6)
        return Bad(kp, "batch must be a whole number >= 1");
      parsed.push_back({static_cast<int>(batch), p50, p99});
    }
    auto profile = Profile::Create(std::move(parsed), load_ms, memory_mb);
    if (!profile.ok()) return Bad(pp, profile.status().message());
    r.profile = *std::move(profile);
    return AddVariant(std::move(r), ip);
  }

  // cluster.replica_cores: [{variant: "m:v", worker_type: T, cores: N}], what
  // one replica of a variant takes of its worker's cores (default 1).
  absl::Status ParseReplicaCores(const YAML::Node& cluster) {
    if (!Present(cluster)) return absl::OkStatus();
    YAML::Node list = cluster["replica_cores"];
    if (!Present(list)) return absl::OkStatus();
    const std::string path = "cluster.replica_cores";
    if (!list.IsSequence()) return Bad(path, "expected a list of {variant, worker_type, cores}");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string ip = Item(path, i);
      MAITRE_RETURN_IF_ERROR(CheckMap(list[i], ip, {"variant", "worker_type", "cores"}));
      std::string name, type;
      double cores = 0;
      MAITRE_RETURN_IF_ERROR(ReadString(list[i], ip, "variant", &name, true));
      MAITRE_RETURN_IF_ERROR(ReadString(list[i], ip, "worker_type", &type, true));
      MAITRE_RETURN_IF_ERROR(ReadNumber(list[i], ip, "cores", &cores, true));
      auto key = VariantKey::Parse(name);
      if (!key) return Bad(Key(ip, "variant"), "expected model:variant");
      const int32_t t = WorkerTypeIndex(type);
      if (t < 0) return Bad(Key(ip, "worker_type"), "not in cluster.worker_types");
      if (!(cores > 0) || cores > exp_.setup.worker_types[t].type.cores) {
        return Bad(Key(ip, "cores"), "must be > 0 and at most the worker type's cores");
      }
      bool found = false;
      for (SimVariant& v : exp_.setup.variants) {
        if (v.key == *key && v.worker_type == t) {
          v.cores_per_replica = cores;
          found = true;
        }
      }
      if (!found) return Bad(ip, absl::StrCat("no profile for ", name, " on ", type));
    }
    return absl::OkStatus();
  }

  absl::Status ParseApps(const YAML::Node& list) {
    const std::string path = "apps";
    if (!Present(list) || !list.IsSequence() || list.size() == 0) {
      return Bad(path, "expected a non-empty list");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string ip = Item(path, i);
      const YAML::Node& n = list[i];
      MAITRE_RETURN_IF_ERROR(CheckMap(n, ip,
                                      {"name", "latency_ms", "min_accuracy", "max_accuracy_drop",
                                       "sl_min", "share", "models", "variants", "instances",
                                       "rows_per_query"}));
      SimApp app;
      double share = 1;
      int64_t rows_per_query = 1;
      MAITRE_RETURN_IF_ERROR(ReadInt(n, ip, "rows_per_query", &rows_per_query));
      if (rows_per_query < 1 || rows_per_query > 1000000) {
        return Bad(Key(ip, "rows_per_query"), "must be in [1, 1000000]");
      }
      app.rows_per_query = static_cast<int32_t>(rows_per_query);
      MAITRE_RETURN_IF_ERROR(ReadString(n, ip, "name", &app.name, true));
      if (!names.insert(app.name).second) return Bad(Key(ip, "name"), "duplicate app name");
      MAITRE_RETURN_IF_ERROR(ReadMillis(n, ip, "latency_ms", &app.latency, true));
      if (app.latency <= 0) return Bad(Key(ip, "latency_ms"), "must be > 0");
      MAITRE_RETURN_IF_ERROR(ReadNumber(n, ip, "min_accuracy", &app.min_accuracy));
      if (Present(n["max_accuracy_drop"])) {
        double drop = 0;
        MAITRE_RETURN_IF_ERROR(ReadNumber(n, ip, "max_accuracy_drop", &drop));
        if (!(drop >= 0 && drop <= 1)) {
          return Bad(Key(ip, "max_accuracy_drop"), "must be in [0, 1]");
        }
        app.max_accuracy_drop = drop;
      }
      if (Present(n["sl_min"])) {
        double sl_min = 0;
        MAITRE_RETURN_IF_ERROR(ReadNumber(n, ip, "sl_min", &sl_min));
        if (!(sl_min > 0 && sl_min <= 1)) return Bad(Key(ip, "sl_min"), "must be in (0, 1]");
        app.sl_min = sl_min;
      }
      MAITRE_RETURN_IF_ERROR(ReadNumber(n, ip, "share", &share));
      if (share < 0) return Bad(Key(ip, "share"), "must be >= 0");
      MAITRE_RETURN_IF_ERROR(ParseAppModels(n, ip, app));
      MAITRE_RETURN_IF_ERROR(ParseAppVariants(n, ip, app));
      const int32_t app_index = static_cast<int32_t>(exp_.setup.apps.size());
      exp_.setup.apps.push_back(app);
      shares_.push_back(share);
      MAITRE_RETURN_IF_ERROR(ParseAppInstances(n, ip, app, app_index));
    }
    return absl::OkStatus();
  }

  // apps[i].models: the models the app may use (model-less queries); each
  // must have a profile.
  absl::Status ParseAppModels(const YAML::Node& n, const std::string& ip, SimApp& app) {
    YAML::Node models = n["models"];
    if (!Present(models)) return absl::OkStatus();
    const std::string mp = Key(ip, "models");
    if (!models.IsSequence()) return Bad(mp, "expected a list of model names");
    for (size_t k = 0; k < models.size(); ++k) {
      if (!models[k].IsScalar() || models[k].Scalar().empty()) {
        return Bad(Item(mp, k), "expected a model name");
      }
      bool profiled = false;
      for (const SimVariant& v : exp_.setup.variants) profiled |= v.key.model == models[k].Scalar();
      if (!profiled) {
        return Bad(Item(mp, k), absl::StrCat("no profile for model ", models[k].Scalar()));
      }
      app.models.push_back(models[k].Scalar());
    }
    return absl::OkStatus();
  }

  // apps[i].variants: the variants the app is limited to; each must have a
  // profile.
  absl::Status ParseAppVariants(const YAML::Node& n, const std::string& ip, SimApp& app) {
    YAML::Node variants = n["variants"];
    if (!Present(variants)) return absl::OkStatus();
    const std::string vp = Key(ip, "variants");
    if (!variants.IsSequence()) return Bad(vp, "expected a list of model:variant");
    for (size_t k = 0; k < variants.size(); ++k) {
      auto key = variants[k].IsScalar() ? VariantKey::Parse(variants[k].Scalar()) : std::nullopt;
      if (!key) return Bad(Item(vp, k), "expected model:variant");
      bool profiled = false;
      for (const SimVariant& v : exp_.setup.variants) profiled |= v.key == *key;
      if (!profiled) return Bad(Item(vp, k), absl::StrCat("no profile for ", key->ToString()));
      app.variants.push_back(key->ToString());
    }
    return absl::OkStatus();
  }

  // apps[i].instances: the static cluster's instances serving the app, each
  // a profiled variant on a worker type (named when the variant has
  // profiles on several).
  absl::Status ParseAppInstances(const YAML::Node& n, const std::string& ip, const SimApp& app,
                                 int32_t app_index) {
    const std::string lp = Key(ip, "instances");
    YAML::Node instances = n["instances"];
    if (!Present(instances)) return absl::OkStatus();
    if (!instances.IsSequence()) return Bad(lp, "expected a list of {variant, worker_type, count}");
    for (size_t k = 0; k < instances.size(); ++k) {
      const std::string kp = Item(lp, k);
      MAITRE_RETURN_IF_ERROR(
          CheckMap(instances[k], kp, {"variant", "worker_type", "count", "worker"}));
      std::string variant_name, type_name;
      int64_t count = 1, worker = -1;
      MAITRE_RETURN_IF_ERROR(ReadInt(instances[k], kp, "worker", &worker));
      if (Present(instances[k]["worker"]) && worker < 0) {
        return Bad(Key(kp, "worker"), "must be >= 0 (the index among the type's workers)");
      }
      MAITRE_RETURN_IF_ERROR(ReadString(instances[k], kp, "variant", &variant_name, true));
      MAITRE_RETURN_IF_ERROR(ReadString(instances[k], kp, "worker_type", &type_name));
      MAITRE_RETURN_IF_ERROR(ReadInt(instances[k], kp, "count", &count));
      if (count < 0) return Bad(Key(kp, "count"), "must be >= 0");
      auto key = VariantKey::Parse(variant_name);
      if (!key) return Bad(Key(kp, "variant"), "expected model:variant");
      int32_t found = -1;
      for (size_t v = 0; v < exp_.setup.variants.size(); ++v) {
        const SimVariant& sv = exp_.setup.variants[v];
        if (!(sv.key == *key)) continue;
        if (!type_name.empty() && exp_.setup.worker_types[sv.worker_type].type.name != type_name) {
          continue;
        }
        if (found >= 0) {
          return Bad(kp, absl::StrCat(variant_name,
                                      " has profiles on several worker types; name worker_type"));
        }
        found = static_cast<int32_t>(v);
      }
      if (found < 0) {
        return Bad(Key(kp, "variant"),
                   absl::StrCat("no profile for ", variant_name,
                                type_name.empty() ? "" : absl::StrCat(" on ", type_name)));
      }
      if (!AppMayUse(app, *key)) {
        return Bad(Key(kp, "variant"),
                   absl::StrCat(variant_name, " is not in ", Key(ip, "variants")));
      }
      for (int64_t c = 0; c < count; ++c) {
        exp_.setup.instances.push_back({app_index, found, static_cast<int32_t>(worker)});
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseWorkerCounts(const YAML::Node& cluster) {
    auto& types = exp_.setup.worker_types;
    const std::vector<int32_t> needed = WorkersNeeded(exp_.setup);
    YAML::Node workers = Present(cluster) ? cluster["workers"] : YAML::Node();
    if (!Present(workers)) {
      // Default: exactly the workers the instances need.
      for (size_t t = 0; t < types.size(); ++t) types[t].count = needed[t];
      return absl::OkStatus();
    }
    const std::string path = "cluster.workers";
    if (!workers.IsMap()) return Bad(path, "expected a mapping from worker type to count");
    for (const auto& kv : workers) {
      const std::string name = kv.first.Scalar();
      int32_t t = WorkerTypeIndex(name);
      if (t < 0) return Bad(Key(path, name), "not in cluster.worker_types");
      int64_t count;
      if (!kv.second.IsScalar() || !absl::SimpleAtoi(kv.second.Scalar(), &count) || count < 0) {
        return Bad(Key(path, name), "expected a count >= 0");
      }
      types[t].count = static_cast<int32_t>(count);
    }
    for (size_t t = 0; t < types.size(); ++t) {
      if (needed[t] > types[t].count) {
        return Bad(Key(path, types[t].type.name), absl::StrCat("the apps place ", needed[t],
                                                               " instances on this type but the "
                                                               "cluster has ",
                                                               types[t].count, " workers"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseTrace(const YAML::Node& n) {
    const std::string path = "trace";
    if (!Present(n)) return Bad(path, "is required (a generator or a file)");
    MAITRE_RETURN_IF_ERROR(
        CheckMap(n, path,
                 {"file", "generator", "rate_qps", "cv", "shape", "rates_qps", "mean_dwell_s",
                  "amplitude", "period_s", "phase", "app_phases", "spikes", "schedule",
                  "duration_s", "seed"}));
    GeneratorSpec& g = exp_.generator;
    int64_t seed = 1;
    MAITRE_RETURN_IF_ERROR(ReadInt(n, path, "seed", &seed));
    g.seed = static_cast<uint64_t>(seed);
    exp_.setup.seed = g.seed;
    const bool has_file = Present(n["file"]);
    if (has_file == Present(n["generator"])) {
      return Bad(path, "name exactly one of file and generator");
    }
    return has_file ? ParseTraceFile(n, path) : ParseGenerator(n, path);
  }

  // trace.file: arrivals replayed from a CSV.
  absl::Status ParseTraceFile(const YAML::Node& n, const std::string& path) {
    std::string file;
    MAITRE_RETURN_IF_ERROR(ReadString(n, path, "file", &file, true));
    auto text = ReadFileToString(Resolve(base_dir_, file));
    if (!text.ok()) return Bad(Key(path, "file"), text.status().message());
    std::vector<std::string> names;
    for (const SimApp& a : exp_.setup.apps) names.push_back(a.name);
    auto rows = ParseTraceCsv(*text, names);
    if (!rows.ok()) {
      return Bad(Key(path, "file"), absl::StrCat(file, ": ", rows.status().message()));
    }
    exp_.trace_from_file = true;
    exp_.trace_rows = *std::move(rows);
    Nanos duration = exp_.trace_rows.empty() ? 0 : exp_.trace_rows.back().time + 1;
    MAITRE_RETURN_IF_ERROR(ReadSeconds(n, path, "duration_s", &duration));
    if (duration <= 0) return Bad(Key(path, "duration_s"), "must be > 0 (or the trace is empty)");
    exp_.setup.horizon = duration;
    exp_.generator.duration = duration;
    return absl::OkStatus();
  }

  // trace.generator: a synthetic arrival process and its parameters.
  absl::Status ParseGenerator(const YAML::Node& n, const std::string& path) {
    GeneratorSpec& g = exp_.generator;
    std::string kind;
    MAITRE_RETURN_IF_ERROR(ReadString(n, path, "generator", &kind, true));
    auto parsed = ParseGeneratorKind(kind);
    if (!parsed.ok()) return Bad(Key(path, "generator"), parsed.status().message());
    g.kind = *parsed;
    MAITRE_RETURN_IF_ERROR(ReadSeconds(n, path, "duration_s", &g.duration, true));
    MAITRE_RETURN_IF_ERROR(ReadNumber(n, path, "rate_qps", &g.rate_qps));
    MAITRE_RETURN_IF_ERROR(ReadNumber(n, path, "cv", &g.cv));
    if (Present(n["shape"])) {
      if (Present(n["cv"])) return Bad(path, "give either cv or shape, not both");
      double shape = 0;
      MAITRE_RETURN_IF_ERROR(ReadNumber(n, path, "shape", &shape));
      if (!(shape > 0)) return Bad(Key(path, "shape"), "must be > 0");
      g.cv = 1 / std::sqrt(shape);
    }
    MAITRE_RETURN_IF_ERROR(ReadNumberList(n, path, "rates_qps", &g.mmpp_rates_qps));
    std::vector<double> dwell;
    MAITRE_RETURN_IF_ERROR(ReadNumberList(n, path, "mean_dwell_s", &dwell));
    for (double d : dwell) {
      g.mmpp_mean_dwell.push_back(static_cast<Nanos>(std::llround(d * kSecond)));
    }
    MAITRE_RETURN_IF_ERROR(ReadNumber(n, path, "amplitude", &g.amplitude));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(n, path, "period_s", &g.period));
    MAITRE_RETURN_IF_ERROR(ReadNumber(n, path, "phase", &g.phase));
    MAITRE_RETURN_IF_ERROR(ReadNumberList(n, path, "app_phases", &g.app_phases));
    if (!g.app_phases.empty()) {
      if (g.kind != GeneratorKind::kDiurnal) return Bad(Key(path, "app_phases"), "needs diurnal");
      if (g.app_phases.size() != shares_.size()) {
        return Bad(Key(path, "app_phases"), absl::StrCat("needs one phase per app (", shares_.size(), ")"));
      }
    }
    MAITRE_RETURN_IF_ERROR(ParseSpikesAndSchedule(n, path, g));
    g.app_shares = shares_;
    exp_.setup.horizon = g.duration;
    // Build once now so that a bad parameter is reported against the trace.
    auto source = CreateGenerator(g);
    if (!source.ok()) return Bad(path, source.status().message());
    return absl::OkStatus();
  }

  // trace.spikes (rate multipliers for a while) and trace.schedule (a
  // piecewise-constant rate).
  static absl::Status ParseSpikesAndSchedule(const YAML::Node& n, const std::string& path,
                                             GeneratorSpec& g) {
    if (YAML::Node spikes = n["spikes"]; Present(spikes)) {
      const std::string sp = Key(path, "spikes");
      if (!spikes.IsSequence()) return Bad(sp, "expected a list of {at_s, duration_s, multiplier}");
      for (size_t i = 0; i < spikes.size(); ++i) {
        const std::string ip = Item(sp, i);
        MAITRE_RETURN_IF_ERROR(CheckMap(spikes[i], ip, {"at_s", "duration_s", "multiplier"}));
        Spike s;
        MAITRE_RETURN_IF_ERROR(ReadSeconds(spikes[i], ip, "at_s", &s.at, true));
        MAITRE_RETURN_IF_ERROR(ReadSeconds(spikes[i], ip, "duration_s", &s.length, true));
        MAITRE_RETURN_IF_ERROR(ReadNumber(spikes[i], ip, "multiplier", &s.multiplier, true));
        g.spikes.push_back(s);
      }
    }
    if (YAML::Node schedule = n["schedule"]; Present(schedule)) {
      const std::string sp = Key(path, "schedule");
      if (!schedule.IsSequence()) return Bad(sp, "expected a list of {at_s, rate_qps}");
      for (size_t i = 0; i < schedule.size(); ++i) {
        const std::string ip = Item(sp, i);
        MAITRE_RETURN_IF_ERROR(CheckMap(schedule[i], ip, {"at_s", "rate_qps"}));
        RateStep s;
        MAITRE_RETURN_IF_ERROR(ReadSeconds(schedule[i], ip, "at_s", &s.at, true));
        MAITRE_RETURN_IF_ERROR(ReadNumber(schedule[i], ip, "rate_qps", &s.rate_qps, true));
        g.schedule.push_back(s);
      }
    }
    return absl::OkStatus();
  }

  // simulation.burst_pool (BurstPool in sim/simulator.h).
  absl::Status ParseBurstPool(const YAML::Node& b) {
    const std::string bp = "simulation.burst_pool";
    MAITRE_RETURN_IF_ERROR(CheckMap(
        b, bp, {"service_ms", "cold_start_ms", "keep_warm_s", "concurrency", "price_per_request"}));
    BurstPool& pool = exp_.setup.burst_pool;
    pool.enabled = true;
    int64_t concurrency = pool.concurrency;
    MAITRE_RETURN_IF_ERROR(ReadMillis(b, bp, "service_ms", &pool.service, true));
    MAITRE_RETURN_IF_ERROR(ReadMillis(b, bp, "cold_start_ms", &pool.cold_start));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(b, bp, "keep_warm_s", &pool.keep_warm));
    MAITRE_RETURN_IF_ERROR(ReadInt(b, bp, "concurrency", &concurrency));
    MAITRE_RETURN_IF_ERROR(ReadNumber(b, bp, "price_per_request", &pool.price_per_request, true));
    if (pool.service <= 0) return Bad(Key(bp, "service_ms"), "must be > 0");
    if (pool.cold_start < 0) return Bad(Key(bp, "cold_start_ms"), "must be >= 0");
    if (pool.keep_warm < 0) return Bad(Key(bp, "keep_warm_s"), "must be >= 0");
    if (concurrency < 1 || concurrency > 10000000) {
      return Bad(Key(bp, "concurrency"), "must be >= 1");
    }
    if (!(pool.price_per_request >= 0)) return Bad(Key(bp, "price_per_request"), "must be >= 0");
    if (exp_.setup.routing != "selection") return Bad(bp, "needs routing: selection");
    pool.concurrency = static_cast<int32_t>(concurrency);
    return absl::OkStatus();
  }

  // simulation.interruptions (SpotInterruptions in sim/simulator.h).
  absl::Status ParseInterruptions(const YAML::Node& n) {
    const std::string path = "simulation.interruptions";
    MAITRE_RETURN_IF_ERROR(CheckMap(n, path, {"mean_between_s", "lead_s"}));
    SpotInterruptions& spot = exp_.setup.interruptions;
    spot.enabled = true;
    MAITRE_RETURN_IF_ERROR(ReadSeconds(n, path, "mean_between_s", &spot.mean_between, true));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(n, path, "lead_s", &spot.lead));
    if (spot.mean_between <= 0) return Bad(Key(path, "mean_between_s"), "must be > 0");
    if (spot.lead < 0) return Bad(Key(path, "lead_s"), "must be >= 0");
    if (exp_.setup.routing != "selection") return Bad(path, "needs routing: selection");
    return absl::OkStatus();
  }

  absl::Status ParseSimulation(const YAML::Node& n) {
    const std::string path = "simulation";
    if (!Present(n)) return absl::OkStatus();
    MAITRE_RETURN_IF_ERROR(
        CheckMap(n, path, {"service_noise", "seed", "worker_losses", "interference", "jobs",
                           "burst_pool", "interruptions"}));
    if (YAML::Node i = n["interruptions"]; Present(i)) {
      MAITRE_RETURN_IF_ERROR(ParseInterruptions(i));
    }
    if (YAML::Node b = n["burst_pool"]; Present(b)) MAITRE_RETURN_IF_ERROR(ParseBurstPool(b));
    if (YAML::Node jobs = n["jobs"]; Present(jobs)) {
      const std::string jp = Key(path, "jobs");
      if (!jobs.IsSequence()) return Bad(jp, "expected a list of {app, rows, chunk_rows, at_s}");
      for (size_t i = 0; i < jobs.size(); ++i) {
        const std::string ip = Item(jp, i);
        MAITRE_RETURN_IF_ERROR(CheckMap(jobs[i], ip, {"app", "rows", "chunk_rows", "at_s"}));
        std::string app;
        int64_t rows = 0, chunk = 64;
        SimJob job;
        MAITRE_RETURN_IF_ERROR(ReadString(jobs[i], ip, "app", &app, true));
        MAITRE_RETURN_IF_ERROR(ReadInt(jobs[i], ip, "rows", &rows, true));
        MAITRE_RETURN_IF_ERROR(ReadInt(jobs[i], ip, "chunk_rows", &chunk));
        MAITRE_RETURN_IF_ERROR(ReadSeconds(jobs[i], ip, "at_s", &job.at));
        job.app = experiment_yaml::AppIndex(exp_.setup, app);
        if (job.app < 0) return Bad(Key(ip, "app"), absl::StrCat("no app named ", app));
        if (rows < 1) return Bad(Key(ip, "rows"), "must be >= 1");
        if (chunk < 1 || chunk > 1000000) return Bad(Key(ip, "chunk_rows"), "must be in [1, 1000000]");
        if (job.at < 0) return Bad(Key(ip, "at_s"), "must be >= 0");
        if (exp_.setup.routing != "selection") return Bad(jp, "needs routing: selection");
        job.rows = rows;
        job.chunk_rows = static_cast<int32_t>(chunk);
        exp_.setup.jobs.push_back(job);
      }
    }
    if (YAML::Node in = n["interference"]; Present(in)) {
      const std::string ip = Key(path, "interference");
      MAITRE_RETURN_IF_ERROR(
          CheckMap(in, ip, {"onset", "slowdown_at_full", "oversubscribed_penalty"}));
      InterferenceModel& m = exp_.setup.interference;
      m.enabled = true;
      MAITRE_RETURN_IF_ERROR(ReadNumber(in, ip, "onset", &m.onset));
      MAITRE_RETURN_IF_ERROR(ReadNumber(in, ip, "slowdown_at_full", &m.slowdown_at_full, true));
      if (!(m.onset >= 0 && m.onset < 1)) return Bad(Key(ip, "onset"), "must be in [0, 1)");
      MAITRE_RETURN_IF_ERROR(
          ReadNumber(in, ip, "oversubscribed_penalty", &m.oversubscribed_penalty));
      if (!(m.slowdown_at_full >= 1)) return Bad(Key(ip, "slowdown_at_full"), "must be >= 1");
      if (!(m.oversubscribed_penalty >= 1)) {
        return Bad(Key(ip, "oversubscribed_penalty"), "must be >= 1");
      }
    }
    std::string noise = "none";
    MAITRE_RETURN_IF_ERROR(ReadString(n, path, "service_noise", &noise));
    if (noise != "none" && noise != "lognormal") {
      return Bad(Key(path, "service_noise"), "expected none or lognormal");
    }
    exp_.setup.service_noise = noise == "lognormal";
    int64_t seed = static_cast<int64_t>(exp_.setup.seed);
    MAITRE_RETURN_IF_ERROR(ReadInt(n, path, "seed", &seed));
    exp_.setup.seed = static_cast<uint64_t>(seed);
    if (YAML::Node losses = n["worker_losses"]; Present(losses)) {
      const std::string lp = Key(path, "worker_losses");
      if (!losses.IsSequence()) return Bad(lp, "expected a list of {worker, at_s}");
      for (size_t i = 0; i < losses.size(); ++i) {
        const std::string ip = Item(lp, i);
        MAITRE_RETURN_IF_ERROR(CheckMap(losses[i], ip, {"worker", "at_s"}));
        WorkerLoss loss;
        MAITRE_RETURN_IF_ERROR(ReadString(losses[i], ip, "worker", &loss.worker, true));
        MAITRE_RETURN_IF_ERROR(ReadSeconds(losses[i], ip, "at_s", &loss.at, true));
        if (loss.at < 0) return Bad(Key(ip, "at_s"), "must be >= 0");
        exp_.setup.worker_losses.push_back(std::move(loss));
      }
    }
    return absl::OkStatus();
  }

  std::string base_dir_;
  Experiment exp_;
  std::vector<double> shares_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ArrivalSource>> Experiment::MakeArrivals() const {
  if (trace_from_file) return CreateReplay(trace_rows, setup.horizon);
  return CreateGenerator(generator);
}

absl::StatusOr<Experiment> ParseExperiment(absl::string_view yaml, const std::string& base_dir) {
  // yaml-cpp reports errors by throwing; nothing escapes this function.
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (!root || root.IsNull()) return absl::InvalidArgumentError("the experiment file is empty");
    return Parser(base_dir).Parse(root);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("experiment YAML, line ", e.mark.line + 1, ": ", e.msg));
  }
}

absl::StatusOr<Experiment> LoadExperimentFile(const std::string& yaml_path) {
  auto text = ReadFileToString(yaml_path);
  if (!text.ok()) return text.status();
  size_t slash = yaml_path.find_last_of('/');
  std::string base_dir = slash == std::string::npos ? "." : yaml_path.substr(0, slash);
  if (base_dir.empty()) base_dir = "/";
  auto exp = ParseExperiment(*text, base_dir);
  if (!exp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(yaml_path, ": ", exp.status().message()));
  }
  return exp;
}

}  // namespace maitre::sim
