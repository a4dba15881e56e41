#include "runtime/testing/zoo.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/status_macros.h"

namespace maitre::runtime::testing {

absl::StatusOr<std::string> ZooDir() {
  const char* dir = std::getenv("MAITRE_ZOO_DIR");
  if (dir == nullptr || *dir == '\0') {
    return absl::FailedPreconditionError(
        "MAITRE_ZOO_DIR is not set; run the tests through ctest, or set it to the "
        "directory scripts/build-zoo wrote");
  }
  struct stat st;
  std::string json = absl::StrCat(dir, "/zoo.json");
  if (stat(json.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the example zoo is missing: ", json,
        " does not exist; build it with `/usr/bin/python3 scripts/build-zoo --out ", dir, "`"));
  }
  return std::string(dir);
}

namespace {

// The directory of the zoo in `subdir`, or FailedPrecondition: a zoo built
// before the coarse task existed has no coarse/.
absl::StatusOr<std::string> SubZooDir(const std::string& subdir) {
  MAITRE_ASSIGN_OR_RETURN(std::string top, ZooDir());
  if (subdir.empty()) return top;
  std::string dir = absl::StrCat(top, "/", subdir);
  struct stat st;
  if (stat((dir + "/zoo.json").c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the example zoo has no ", subdir, "/zoo.json (an older build-zoo made it); ",
                     "run `/usr/bin/python3 scripts/build-zoo --out ", top, "` again"));
  }
  return dir;
}

}  // namespace

absl::StatusOr<std::vector<ZooModel>> LoadZoo(const std::string& subdir) {
  MAITRE_ASSIGN_OR_RETURN(std::string dir, SubZooDir(subdir));
  MAITRE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(dir + "/zoo.json"));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.empty()) {
    return absl::FailedPreconditionError(dir + "/zoo.json is not a non-empty array");
  }
  std::vector<ZooModel> models;
  for (const nlohmann::json& m : j) {
    if (!m.is_object() || !m.contains("name") || !m.contains("torchscript") ||
        !m.contains("onnx") || !m.contains("accuracy")) {
      return absl::FailedPreconditionError(
          dir + "/zoo.json entries need name, torchscript, onnx and accuracy");
    }
    ZooModel z;
    z.name = m["name"].get<std::string>();
    z.torchscript = dir + "/" + m["torchscript"].get<std::string>();
    z.onnx = dir + "/" + m["onnx"].get<std::string>();
    z.accuracy = m["accuracy"].get<double>();
    models.push_back(std::move(z));
  }
  return models;
}

absl::StatusOr<const Valset*> ZooValset(const std::string& subdir) {
  // Never destroyed, so pointers handed out stay valid until exit.
  static auto* cache = new std::map<std::string, absl::StatusOr<Valset>>();
  auto it = cache->find(subdir);
  if (it == cache->end()) {
    absl::StatusOr<std::string> dir = SubZooDir(subdir);
    if (!dir.ok()) return dir.status();
    absl::StatusOr<std::string> bytes = ReadFileToString(*dir + "/valset.npz");
    it = cache
             ->emplace(subdir,
                       bytes.ok() ? ParseValset(*bytes) : absl::StatusOr<Valset>(bytes.status()))
             .first;
  }
  if (!it->second.ok()) return it->second.status();
  return &it->second.value();
}

ModelSpec FmnistSpec(int64_t classes) {
  ModelSpec spec;
  spec.inputs.push_back({"input", DataType::kFp32, {-1, 1, 28, 28}});
  spec.outputs.push_back({"logits", DataType::kFp32, {-1, classes}});
  return spec;
}

ScopedTempDir::ScopedTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base != nullptr && *base ? base : "/tmp",
                                     "/maitre-runtime-test-XXXXXX");
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  char* made = mkdtemp(buf.data());
  // Without a directory the tests' writes fail and say so; nothing to remove.
  path_ = made == nullptr ? "" : std::string(made);
}

ScopedTempDir::~ScopedTempDir() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

absl::Status RunPython(const std::string& dir, const std::string& script) {
  std::string path = dir + "/script.py";
  MAITRE_RETURN_IF_ERROR(WriteFileAtomically(path, script));
  std::string command = absl::StrCat("cd '", dir, "' && OPENBLAS_NUM_THREADS=1 /usr/bin/python3 '",
                                     path, "' 2>&1");
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (pipe == nullptr) return absl::InternalError("cannot start /usr/bin/python3");
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe.get())) > 0) output.append(buf, n);
  int rc = pclose(pipe.release());
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("/usr/bin/python3 ", path, " failed (status ", rc, "):\n", output));
  }
  return absl::OkStatus();
}

}  // namespace maitre::runtime::testing
