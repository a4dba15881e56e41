// Helpers shared by the registry's tests: a scratch directory that removes
// itself, small valid records to store, and a row count read past the stores.
//
// Thread-safety: the helpers are pure functions; a TempDir is not shared.
#pragma once

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "controller/registry/registry.h"
#include "core/sha256.h"
#include "gtest/gtest.h"

namespace maitre::registry::test_util {

// A fresh directory under the test temp dir, removed with its contents when
// the object goes away, so a failing test leaves nothing behind either.
class TempDir {
 public:
  TempDir() {
    std::string base = ::testing::TempDir();  // ends with '/'
    if (!base.empty() && base.back() == '/') base.pop_back();
    std::string pattern = base + "/maitre_registry_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A registry in a scratch file, opened before each test; Open() again closes
// it and reopens the same file, to show what survives.
class RegistryFileTest : public ::testing::Test {
 protected:
  void Open() {
    registry_.reset();
    auto opened = Registry::Open({tmp_.File("registry.db")});
    ASSERT_TRUE(opened.ok()) << opened.status();
    registry_ = *std::move(opened);
  }
  void SetUp() override { Open(); }

  TempDir tmp_;
  std::unique_ptr<Registry> registry_;
};

// A blob hash derived from `seed`, standing in for a real stored file.
inline std::string FakeBlob(const std::string& seed) { return Sha256Hex(seed); }

inline ModelSpec SimpleSpec() {
  ModelSpec spec;
  spec.format = ModelFormat::kTorchScript;
  spec.inputs.push_back(TensorSpec{"input", DataType::kFp32, {-1, 1, 28, 28}});
  spec.outputs.push_back(TensorSpec{"logits", DataType::kFp32, {-1, 10}});
  return spec;
}

inline ModelRecord MakeModel(const std::string& app, const std::string& name,
                             const std::string& bytes_seed) {
  ModelRecord m;
  m.app = app;
  m.name = name;
  m.spec = SimpleSpec();
  m.source_blob = FakeBlob(bytes_seed);
  m.created_unix_ms = 1700000000000;
  return m;
}

inline VariantRecord MakeVariant(const std::string& model, const std::string& variant,
                                 Runtime runtime = Runtime::kTorch) {
  VariantRecord v;
  v.key = {model, variant};
  v.runtime = runtime;
  v.blob = FakeBlob(model + ":" + variant);
  v.accuracy = 0.875;
  v.accuracy_source = AccuracySource::kMeasured;
  v.state = VariantState::kReady;
  return v;
}

// A profile at batches 1, 2, 4, ... up to `max_batch`, with latencies that
// grow with the batch and are offset by `base_ms`.
inline ProfileRecord MakeProfile(const std::string& model, const std::string& variant,
                                 const std::string& worker_type, double base_ms = 1.0,
                                 int max_batch = 64) {
  std::vector<LatencyPoint> points;
  for (int b = 1; b <= max_batch; b *= 2) {
    points.push_back(LatencyPoint{b, base_ms + 0.25 * b, base_ms + 0.4 * b});
  }
  ProfileRecord p;
  p.key = {model, variant};
  p.worker_type = worker_type;
  p.accuracy = 0.875;
  p.profile = *Profile::Create(std::move(points), /*load_ms=*/42.5, /*memory_mb=*/128.25);
  return p;
}

// Rows in one table of the SQLite file at `db_path`, read past the stores to
// see what is really stored.
inline int64_t CountRows(const std::string& db_path, const std::string& table) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  std::string sql = "SELECT COUNT(*) FROM " + table;  // test-only, fixed table names
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

}  // namespace maitre::registry::test_util
