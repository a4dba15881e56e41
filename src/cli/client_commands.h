// The client subcommands of `maitre` (docs/api.md, "Command line"): register,
// infer, apps, models. Each talks to a running server over its HTTP API.
#pragma once

#include <string>
#include <vector>

namespace maitre::cli {

struct RegisterArgs {
  std::string server;
  std::string app;
  std::string name;
  std::string model;    // file
  std::string valset;   // optional .npz
  std::string onnx;     // optional ONNX companion
  std::string meta;     // optional meta JSON file
  std::string format;   // torchscript | onnx (default: from the file)
  std::vector<std::string> inputs;   // NAME:DTYPE:SHAPE
  std::vector<std::string> outputs;  // NAME:DTYPE:SHAPE
  double accuracy = -1;              // declared, when no valset
  bool json = false;
};

struct InferArgs {
  std::string server;
  std::string model;
  std::string app;
  std::string pipeline;  // a registered pipeline (docs/pipelines.md)
  double latency_ms = 0;
  double min_accuracy = -1;
  double max_cost = -1;
  std::string input;  // .npz or .json
  bool json = false;
};

struct ListArgs {
  std::string server;
  std::string app;
  bool json = false;
  // `apps --app A --latency-ms ...`: set the app's default requirements
  // and its max_accuracy_drop and sl_min (negative: not given).
  double latency_ms = -1;
  double min_accuracy = -1;
  double max_cost = -1;
  double max_accuracy_drop = -1;
  double sl_min = -1;
};

struct VariantsArgs {
  std::string server;
  std::string app;   // empty: every app
  bool csv = false;  // the profile CSV (docs/api.md, "Files")
  bool json = false;
};

struct ProfilesArgs {
  std::string server;
  std::string file;  // import: the CSV to read; export: where to write ("-" = stdout)
  std::string app;   // export: only this app
};

// `models delete APP MODEL` and `apps delete APP`.
struct DeleteArgs {
  std::string server;
  std::string app;
  std::string model;   // empty: the whole app
  bool force = false;  // cancel the offline jobs that use it
  bool json = false;
};

int RunRegister(const RegisterArgs& args);
int RunDelete(const DeleteArgs& args);
int RunVariants(const VariantsArgs& args);
int RunProfilesImport(const ProfilesArgs& args);
int RunProfilesExport(const ProfilesArgs& args);
int RunInfer(const InferArgs& args);
int RunApps(const ListArgs& args);
int RunModels(const ListArgs& args);

}  // namespace maitre::cli
