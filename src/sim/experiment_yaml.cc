#include "sim/experiment_yaml.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace maitre::sim::experiment_yaml {

absl::Status Bad(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

std::string Key(const std::string& path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

bool Present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

std::string Item(const std::string& path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

int32_t AppIndex(const SimulationSetup& setup, const std::string& name) {
  for (size_t a = 0; a < setup.apps.size(); ++a) {
    if (setup.apps[a].name == name) return static_cast<int32_t>(a);
  }
  return -1;
}

int32_t WorkerTypeIndex(const SimulationSetup& setup, const std::string& name) {
  for (size_t t = 0; t < setup.worker_types.size(); ++t) {
    if (setup.worker_types[t].type.name == name) return static_cast<int32_t>(t);
  }
  return -1;
}

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return absl::StrCat(base_dir, "/", path);
}

absl::Status CheckMap(const YAML::Node& node, const std::string& path,
                      const std::vector<std::string>& allowed) {
  if (!node.IsMap()) return Bad(path, "expected a mapping");
  for (const auto& kv : node) {
    std::string key = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return Bad(Key(path, key),
                 absl::StrCat("unknown key (expected one of: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> AsNumber(const YAML::Node& node, const std::string& path) {
  double v;
  if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &v) || !std::isfinite(v)) {
    return Bad(path, "expected a number");
  }
  return v;
}

absl::Status ReadNumber(const YAML::Node& map, const std::string& path, const char* key,
                        double* out, bool required) {
  YAML::Node n = map[key];
  if (!Present(n)) return required ? Bad(Key(path, key), "is required") : absl::OkStatus();
  MAITRE_ASSIGN_OR_RETURN(*out, AsNumber(n, Key(path, key)));
  return absl::OkStatus();
}

absl::Status ReadInt(const YAML::Node& map, const std::string& path, const char* key, int64_t* out,
                     bool required) {
  YAML::Node n = map[key];
  if (!Present(n)) return required ? Bad(Key(path, key), "is required") : absl::OkStatus();
  if (!n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), out)) {
    return Bad(Key(path, key), "expected an integer");
  }
  return absl::OkStatus();
}

absl::Status ReadString(const YAML::Node& map, const std::string& path, const char* key,
                        std::string* out, bool required) {
  YAML::Node n = map[key];
  if (!Present(n)) return required ? Bad(Key(path, key), "is required") : absl::OkStatus();
  if (!n.IsScalar() || n.Scalar().empty()) return Bad(Key(path, key), "expected a string");
  *out = n.Scalar();
  return absl::OkStatus();
}

absl::Status ReadBool(const YAML::Node& map, const std::string& path, const char* key, bool* out) {
  YAML::Node n = map[key];
  if (!Present(n)) return absl::OkStatus();
  const std::string v = n.IsScalar() ? n.Scalar() : "";
  if (v == "true" || v == "on" || v == "yes") {
    *out = true;
  } else if (v == "false" || v == "off" || v == "no") {
    *out = false;
  } else {
    return Bad(Key(path, key), "expected true or false");
  }
  return absl::OkStatus();
}

absl::Status ReadMillis(const YAML::Node& map, const std::string& path, const char* key, Nanos* out,
                        bool required) {
  double ms = ToMillis(*out);
  MAITRE_RETURN_IF_ERROR(ReadNumber(map, path, key, &ms, required));
  *out = static_cast<Nanos>(std::llround(ms * kMillisecond));
  return absl::OkStatus();
}

absl::Status ReadSeconds(const YAML::Node& map, const std::string& path, const char* key,
                         Nanos* out, bool required) {
  double s = ToSeconds(*out);
  MAITRE_RETURN_IF_ERROR(ReadNumber(map, path, key, &s, required));
  *out = static_cast<Nanos>(std::llround(s * kSecond));
  return absl::OkStatus();
}

absl::Status ReadNumberList(const YAML::Node& map, const std::string& path, const char* key,
                            std::vector<double>* out) {
  YAML::Node n = map[key];
  if (!Present(n)) return absl::OkStatus();
  if (!n.IsSequence()) return Bad(Key(path, key), "expected a list of numbers");
  out->clear();
  for (size_t i = 0; i < n.size(); ++i) {
    MAITRE_ASSIGN_OR_RETURN(double v, AsNumber(n[i], Item(Key(path, key), i)));
    out->push_back(v);
  }
  return absl::OkStatus();
}

}  // namespace maitre::sim::experiment_yaml
