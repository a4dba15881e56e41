// The Registry across restarts, schema migrations, damaged files and
// concurrent writers.
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "controller/registry/registry.h"
#include "controller/registry/registry_test_util.h"
#include "core/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre::registry {
namespace {

using test_util::MakeModel;
using test_util::MakeProfile;
using test_util::MakeVariant;
using test_util::TempDir;
using ::testing::HasSubstr;

std::unique_ptr<Registry> MustOpen(Registry::Options options) {
  auto opened = Registry::Open(std::move(options));
  EXPECT_TRUE(opened.ok()) << opened.status();
  return opened.ok() ? *std::move(opened) : nullptr;
}

// Whether `table` exists, read past the Registry.
bool TableExists(const std::string& db_path, const std::string& table) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                               -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_text(st, 1, table.c_str(), -1, SQLITE_TRANSIENT);
  bool exists = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return exists;
}

// The version of the schema this build creates.
int Latest() { return SchemaMigrations().back().version; }

// What a later schema change would append: a new table and a new column.
Migration NextMigration() {
  return {Latest() + 1, "experiments", R"sql(
CREATE TABLE experiments (
  id    TEXT PRIMARY KEY NOT NULL,
  app   TEXT NOT NULL REFERENCES apps(name),
  state TEXT NOT NULL
);
ALTER TABLE apps ADD COLUMN note TEXT NOT NULL DEFAULT '';
)sql"};
}

// The schema as it was before the migration described so (all of it if
// there is none).
std::vector<Migration> MigrationsBefore(const std::string& description) {
  std::vector<Migration> before;
  for (const Migration& m : SchemaMigrations()) {
    if (m.description == description) break;
    before.push_back(m);
  }
  return before;
}

// Fills a registry with one of everything. Profiles and the app's settings
// need the latest schema's columns, so a registry opened at an older schema
// (`latest_schema` false) gets neither; registering the model creates the
// app there.
void Populate(Registry& r, bool latest_schema = true) {
  if (latest_schema) {
    AppRecord app{"fashion", {}};
    app.defaults.latency_ms = 25;
    app.max_accuracy_drop = 0.2;
    ASSERT_TRUE(r.PutApp(app).ok());
  }
  ModelRecord model = MakeModel("fashion", "fmnist-cnn", "cnn bytes");
  model.valset_blob = test_util::FakeBlob("valset");
  ASSERT_TRUE(r.RegisterModel(model, {MakeVariant("fmnist-cnn", "torch"),
                                      MakeVariant("fmnist-cnn", "opencv", Runtime::kOpenCv)})
                  .ok());
  if (!latest_schema) return;
  ASSERT_TRUE(r.PutProfile(MakeProfile("fmnist-cnn", "torch", "cpu-1", 1.5)).ok());
  ASSERT_TRUE(r.PutProfile(MakeProfile("fmnist-cnn", "opencv", "cpu-2", 0.75, 8)).ok());
}

// The registry's contents as one comparable string. DumpModels leaves the
// apps out: a registry opened at a schema older than the apps' latest
// columns cannot list them.
std::string DumpModels(const Registry& r) {
  std::string out;
  for (const auto& m : r.ListModels()) {
    out += "model " + m.app + "/" + m.name + " " + m.source_blob + " " + m.valset_blob + " " +
           ModelSpecToJson(m.spec) + "\n";
  }
  for (const auto& v : r.ListVariants()) {
    out += "variant " + v.key.ToString() + " " + std::string(RuntimeName(v.runtime)) + " " +
           std::string(VariantStateName(v.state)) + " " + v.blob + "\n";
  }
  out += WriteProfileCsv(r.ListProfiles());
  return out;
}

std::string Dump(const Registry& r) {
  std::string out;
  for (const auto& a : r.ListApps()) {
    out += "app " + a.name + " " + std::to_string(a.defaults.latency_ms.value_or(-1)) + " " +
           std::to_string(a.max_accuracy_drop.value_or(-1)) + "\n";
  }
  return out + DumpModels(r);
}

TEST(RegistryDurabilityTest, ReopeningTheFileSeesEverything) {
  TempDir tmp;
  std::string path = tmp.File("data/registry.db");  // the parent dir is created
  std::string before;
  {
    auto r = MustOpen({path});
    Populate(*r);
    before = Dump(*r);
  }
  auto r = MustOpen({path});
  EXPECT_EQ(Dump(*r), before);
  EXPECT_THAT(before, HasSubstr("fmnist-cnn:opencv"));
  EXPECT_EQ(r->ListProfiles().size(), 2u);
}

TEST(RegistryDurabilityTest, AnOlderFileIsMigratedAndKeepsItsData) {
  TempDir tmp;
  std::string path = tmp.File("registry.db");
  std::string before;
  {
    auto r = MustOpen({path, SchemaMigrations()});
    ASSERT_EQ(r->schema_version(), Latest());
    Populate(*r);
    before = Dump(*r);
  }
  ASSERT_FALSE(TableExists(path, "experiments"));
  std::vector<Migration> newer = SchemaMigrations();
  newer.push_back(NextMigration());
  {
    auto r = MustOpen({path, newer});
    EXPECT_EQ(r->schema_version(), Latest() + 1);
    EXPECT_EQ(Dump(*r), before);
    // The widened apps table still takes upserts.
    ASSERT_TRUE(r->PutApp({"audio", {}}).ok());
  }
  EXPECT_TRUE(TableExists(path, "experiments"));
  // Opening again at the same version runs nothing twice.
  auto r = MustOpen({path, newer});
  EXPECT_EQ(r->schema_version(), Latest() + 1);
  EXPECT_EQ(r->ListApps().size(), 2u);
}

TEST(RegistryDurabilityTest, ADataDirFromBeforeJobsGainsThemAndJobsSurviveARestart) {
  TempDir tmp;
  std::string path = tmp.File("registry.db");
  std::vector<Migration> before_jobs = MigrationsBefore("offline jobs");
  ASSERT_LT(before_jobs.size(), SchemaMigrations().size());
  std::string models;
  {
    auto r = MustOpen({path, before_jobs});
    Populate(*r, /*latest_schema=*/false);
    models = DumpModels(*r);
  }
  ASSERT_FALSE(TableExists(path, "jobs"));
  JobRecord job;
  job.id = "job-000001";
  job.seq = 1;
  job.app = "fashion";
  job.input = "/in.npz";
  job.output = "/out";
  job.batch_size = 32;
  job.state = "running";
  job.files = {{"/in.npz", 100, true, 0, 0}};
  {
    auto r = MustOpen({path});
    EXPECT_EQ(r->schema_version(), Latest());
    EXPECT_EQ(DumpModels(*r), models);
    EXPECT_TRUE(r->GetApp("fashion").ok());
    ASSERT_TRUE(r->jobs().CreateJob(job).ok());
    ASSERT_TRUE(r->jobs().UpdateJobProgress(job.id, 0, 64, 50).ok());
  }
  auto r = MustOpen({path});
  auto back = r->jobs().GetJob(job.id);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->state, "running");
  EXPECT_EQ(back->files[0].done_rows, 64);
  EXPECT_EQ(back->files[0].correct, 50);
}

TEST(RegistryDurabilityTest, ProfilesFromBeforeSweepsAreFinal) {
  TempDir tmp;
  std::string path = tmp.File("registry.db");
  std::vector<Migration> before_sweeps = MigrationsBefore("profiles: sweeps left");
  ASSERT_LT(before_sweeps.size(), SchemaMigrations().size());
  {
    auto r = MustOpen({path, before_sweeps});
    Populate(*r, /*latest_schema=*/false);
  }
  // Written as that schema's code wrote them.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "INSERT INTO profiles VALUES ('fmnist-cnn', 'torch', 'cpu-1', 0.9, 12, 80);"
                         "INSERT INTO profile_points VALUES"
                         " ('fmnist-cnn', 'torch', 'cpu-1', 1, 0.2, 0.3);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto r = MustOpen({path});
  std::vector<ProfileRecord> profiles = r->ListProfiles();
  ASSERT_EQ(profiles.size(), 1u);
  EXPECT_EQ(profiles[0].sweeps_left, 0);
  EXPECT_DOUBLE_EQ(profiles[0].profile.LatencyAt(1), 0.2);
}

TEST(RegistryDurabilityTest, AppsFromBeforeMaxAccuracyDropKeepTheirDefaultsAndHaveNone) {
  TempDir tmp;
  std::string path = tmp.File("registry.db");
  std::vector<Migration> before_drop = MigrationsBefore("apps: max_accuracy_drop");
  ASSERT_LT(before_drop.size(), SchemaMigrations().size());
  {
    auto r = MustOpen({path, before_drop});
    Populate(*r, /*latest_schema=*/false);
  }
  // Written as that schema's code wrote them: four columns.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO apps VALUES ('audio', 80, 0.75, 0.5);", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  {
    auto r = MustOpen({path});
    EXPECT_EQ(r->schema_version(), Latest());
    auto audio = r->GetApp("audio");
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_EQ(audio->defaults.latency_ms, 80);
    EXPECT_EQ(audio->defaults.min_accuracy, 0.75);
    EXPECT_EQ(audio->defaults.max_cost, 0.5);
    EXPECT_FALSE(audio->max_accuracy_drop.has_value());
    EXPECT_FALSE(r->GetApp("fashion")->max_accuracy_drop.has_value());
    // The migrated table takes the new column, and keeps it across a restart.
    AppRecord app = *audio;
    app.max_accuracy_drop = 0.05;
    ASSERT_TRUE(r->PutApp(app).ok());
  }
  auto r = MustOpen({path});
  EXPECT_EQ(r->GetApp("audio")->max_accuracy_drop, 0.05);
  EXPECT_EQ(r->GetApp("audio")->defaults.min_accuracy, 0.75);
}

TEST(RegistryDurabilityTest, AFailedMigrationLeavesTheFileAsItWas) {
  TempDir tmp;
  std::string path = tmp.File("registry.db");
  std::string before;
  {
    auto r = MustOpen({path});
    Populate(*r);
    before = Dump(*r);
  }
  std::vector<Migration> broken = SchemaMigrations();
  broken.push_back(
      {Latest() + 1, "half-written",
       "CREATE TABLE experiments (id TEXT); SELECT * FROM no_such_table;"});
  auto failed = Registry::Open({path, broken});
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr(absl::StrCat("migration ", Latest() + 1)));
  EXPECT_FALSE(TableExists(path, "experiments"));  // rolled back with the rest

  auto r = MustOpen({path});
  EXPECT_EQ(r->schema_version(), Latest());
  EXPECT_EQ(Dump(*r), before);
}

TEST(RegistryDurabilityTest, AFileFromANewerBuildIsRefused) {
  TempDir tmp;
  std::string path = tmp.File("registry.db");
  std::vector<Migration> newer = SchemaMigrations();
  newer.push_back(NextMigration());
  { MustOpen({path, newer}); }
  auto older = Registry::Open({path});
  EXPECT_EQ(older.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(older.status().message(), HasSubstr("newer"));
  EXPECT_THAT(older.status().message(), HasSubstr(path));
}

TEST(RegistryDurabilityTest, AMisnumberedMigrationListIsRefused) {
  TempDir tmp;
  std::vector<Migration> gap = SchemaMigrations();
  gap.push_back({Latest() + 2, "skips one", "CREATE TABLE t (x)"});
  EXPECT_EQ(Registry::Open({tmp.File("registry.db"), gap}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegistryDurabilityTest, AFileThatIsNotADatabaseIsAClearError) {
  TempDir tmp;
  std::string path = tmp.File("registry.db");
  std::string junk;
  for (int i = 0; i < 200; ++i) junk += "this is not a SQLite database. ";
  ASSERT_TRUE(WriteFileAtomically(path, junk).ok());
  auto opened = Registry::Open({path});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(opened.status().message(), HasSubstr(path));
}

TEST(RegistryDurabilityTest, ADamagedDatabaseIsRefusedOnOpen) {
  TempDir tmp;
  std::string path = tmp.File("registry.db");
  {
    auto r = MustOpen({path});
    Populate(*r);
    for (int i = 0; i < 50; ++i) {
      std::string name = "model-" + std::to_string(i);
      ASSERT_TRUE(
          r->RegisterModel(MakeModel("fashion", name, name), {MakeVariant(name, "torch")}).ok());
    }
  }
  // Closing the last connection checkpoints the WAL into the main file, so
  // scribbling over its pages after the header damages real data.
  auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 4096u * 3);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 100);
    std::string garbage(size - 4096 - 200, '\x5a');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto opened = Registry::Open({path});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss) << opened.status();
  EXPECT_THAT(opened.status().message(), HasSubstr(path));
}

TEST(RegistryDurabilityTest, ADirectoryInPlaceOfTheFileIsAClearError) {
  TempDir tmp;
  ASSERT_TRUE(MakeDirectories(tmp.File("registry.db")).ok());
  auto opened = Registry::Open({tmp.File("registry.db")});
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("registry.db"));
  EXPECT_EQ(Registry::Open({""}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RegistryDurabilityTest, ConcurrentWritersFromManyThreads) {
  TempDir tmp;
  auto r = MustOpen({tmp.File("registry.db")});
  constexpr int kThreads = 8;
  constexpr int kModelsPerThread = 5;
  std::atomic<bool> writing{true};
  std::atomic<int> failures{0};
  auto check = [&failures](const absl::Status& s) {
    if (!s.ok()) {
      ++failures;
      ADD_FAILURE() << s;
    }
  };
  // A reader runs throughout, so reads interleave with every write.
  std::thread reader([&] {
    while (writing.load()) {
      for (const auto& m : r->ListModels()) check(r->GetModel(m.name).status());
      r->ListProfiles();
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      check(r->PutApp({"shared", {}}));  // the same row from every thread
      for (int i = 0; i < kModelsPerThread; ++i) {
        std::string name = "t" + std::to_string(t) + "-m" + std::to_string(i);
        std::string app = "app" + std::to_string(t % 3);
        check(r->RegisterModel(MakeModel(app, name, name),
                               {MakeVariant(name, "torch"), MakeVariant(name, "torch-opt")}));
        for (const char* type : {"cpu-1", "cpu-2"})
          check(r->PutProfile(MakeProfile(name, "torch", type)));
        VariantRecord v = MakeVariant(name, "torch-opt");
        v.state = VariantState::kFailed;
        check(r->PutVariant(v));
      }
    });
  }
  for (auto& w : writers) w.join();
  writing = false;
  reader.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(r->ListApps().size(), 4u);  // shared, app0, app1, app2
  EXPECT_EQ(r->ListModels().size(), static_cast<size_t>(kThreads * kModelsPerThread));
  EXPECT_EQ(r->ListVariants().size(), static_cast<size_t>(2 * kThreads * kModelsPerThread));
  EXPECT_EQ(r->ListProfiles().size(), static_cast<size_t>(2 * kThreads * kModelsPerThread));
  int failed = 0;
  for (const auto& v : r->ListVariants()) failed += v.state == VariantState::kFailed;
  EXPECT_EQ(failed, kThreads * kModelsPerThread);
}

TEST(RegistryDurabilityTest, TwoRegistriesOnOneFileShareIt) {
  // Two connections stand in for two processes (say `maitre serve` and a
  // tool opening the data dir): writers queue on SQLite's lock and each sees
  // the other's commits.
  TempDir tmp;
  std::string path = tmp.File("registry.db");
  auto a = MustOpen({path});
  auto b = MustOpen({path});
  auto write = [](Registry* r, const std::string& prefix) {
    for (int i = 0; i < 20; ++i) {
      std::string name = prefix + std::to_string(i);
      EXPECT_TRUE(
          r->RegisterModel(MakeModel("fashion", name, name), {MakeVariant(name, "torch")}).ok());
    }
  };
  std::thread ta(write, a.get(), "a");
  std::thread tb(write, b.get(), "b");
  ta.join();
  tb.join();
  EXPECT_EQ(a->ListModels().size(), 40u);
  EXPECT_EQ(b->ListModels().size(), 40u);
}

}  // namespace
}  // namespace maitre::registry
