// Reading the experiment YAML (experiment_config.h): small readers for
// typed fields that report errors against the key's path ("apps[0].share:
// expected a number"), and the parser of the `policies` section, which
// lives in experiment_policies.cc. Private to the experiment parser.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/clock.h"
#include "sim/simulator.h"
#include "yaml-cpp/yaml.h"

namespace maitre::sim::experiment_yaml {

// InvalidArgument "path: message".
absl::Status Bad(const std::string& path, absl::string_view message);

// "path.key", or "key" at the top level.
std::string Key(const std::string& path, absl::string_view key);

// Absent keys and empty values ("key:") both count as not given.
bool Present(const YAML::Node& n);

// "path[i]".
std::string Item(const std::string& path, size_t i);

// The index of the app or worker type of that name in `setup`, or -1.
int32_t AppIndex(const SimulationSetup& setup, const std::string& name);
int32_t WorkerTypeIndex(const SimulationSetup& setup, const std::string& name);

// `path` relative to the experiment file's directory, unless absolute.
std::string Resolve(const std::string& base_dir, const std::string& path);

// Rejects keys outside `allowed`, so that a typo is an error rather than a
// silently ignored setting.
absl::Status CheckMap(const YAML::Node& node, const std::string& path,
                      const std::vector<std::string>& allowed);

absl::StatusOr<double> AsNumber(const YAML::Node& node, const std::string& path);

// The Read* functions read map[key] into *out when present, leaving *out as
// it is otherwise; an absent key is an error only when `required`.
absl::Status ReadNumber(const YAML::Node& map, const std::string& path, const char* key,
                        double* out, bool required = false);
absl::Status ReadInt(const YAML::Node& map, const std::string& path, const char* key, int64_t* out,
                     bool required = false);
absl::Status ReadString(const YAML::Node& map, const std::string& path, const char* key,
                        std::string* out, bool required = false);
// true/on/yes or false/off/no.
absl::Status ReadBool(const YAML::Node& map, const std::string& path, const char* key, bool* out);
// A number of milliseconds (seconds) into Nanos.
absl::Status ReadMillis(const YAML::Node& map, const std::string& path, const char* key, Nanos* out,
                        bool required = false);
absl::Status ReadSeconds(const YAML::Node& map, const std::string& path, const char* key,
                         Nanos* out, bool required = false);
absl::Status ReadNumberList(const YAML::Node& map, const std::string& path, const char* key,
                            std::vector<double>* out);

// The `policies` section (batching, routing, selection, the model and
// cluster autoscalers, the report interval) into `setup`, whose worker
// types, variants, apps and instances are already parsed: each policy is
// built once against them so that a bad parameter is reported against its
// key. Absent: the defaults.
absl::Status ParsePolicies(const YAML::Node& n, SimulationSetup& setup);

// The `pipelines` section (experiment_pipelines.cc) into `setup`, whose
// policies are parsed: its pipelines, and an app per stage added after the
// others. `base_dir` resolves plan files. Absent: none.
absl::Status ParsePipelines(const YAML::Node& n, const std::string& base_dir,
                            SimulationSetup& setup);

}  // namespace maitre::sim::experiment_yaml
