// Behaviour of the Registry's calls on one open file. Restarts, migrations,
// corrupt files and concurrency are in registry_durability_test.cc.
#include "controller/registry/registry.h"

#include <cmath>
#include <string>
#include <vector>

#include "controller/registry/registry_test_util.h"
#include "core/profile_csv.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre::registry {
namespace {

using test_util::FakeBlob;
using test_util::MakeModel;
using test_util::MakeProfile;
using test_util::MakeVariant;
using test_util::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

void ExpectSameVariant(const VariantRecord& a, const VariantRecord& b) {
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.runtime, b.runtime);
  EXPECT_EQ(a.blob, b.blob);
  EXPECT_EQ(a.accuracy, b.accuracy);
  EXPECT_EQ(a.accuracy_source, b.accuracy_source);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.detail, b.detail);
}

// Exact comparison, doubles included: the store must not round anything.
void ExpectSameProfile(const ProfileRecord& a, const ProfileRecord& b) {
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.worker_type, b.worker_type);
  EXPECT_EQ(a.accuracy, b.accuracy);
  EXPECT_EQ(a.profile.load_ms(), b.profile.load_ms());
  EXPECT_EQ(a.profile.memory_mb(), b.profile.memory_mb());
  EXPECT_EQ(a.sweeps_left, b.sweeps_left);
  ASSERT_EQ(a.profile.points().size(), b.profile.points().size());
  for (size_t i = 0; i < a.profile.points().size(); ++i) {
    EXPECT_EQ(a.profile.points()[i].batch, b.profile.points()[i].batch);
    EXPECT_EQ(a.profile.points()[i].p50_ms, b.profile.points()[i].p50_ms);
    EXPECT_EQ(a.profile.points()[i].p99_ms, b.profile.points()[i].p99_ms);
  }
}

std::vector<std::string> VariantIds(const std::vector<VariantRecord>& variants) {
  std::vector<std::string> ids;
  for (const auto& v : variants) ids.push_back(v.key.ToString());
  return ids;
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Registry::Open({tmp_.File("registry.db")});
    ASSERT_TRUE(opened.ok()) << opened.status();
    registry_ = *std::move(opened);
  }

  // Registers `name` under `app` with variants torch and opencv.
  void Register(const std::string& app, const std::string& name, const std::string& seed = "v1") {
    ASSERT_TRUE(registry_
                    ->RegisterModel(
                        MakeModel(app, name, seed),
                        {MakeVariant(name, "torch"), MakeVariant(name, "opencv", Runtime::kOpenCv)})
                    .ok());
  }

  // Rows in one table, read past the Registry to see what is really stored.
  int64_t CountRows(const std::string& table) {
    return test_util::CountRows(tmp_.File("registry.db"), table);
  }

  TempDir tmp_;
  std::unique_ptr<Registry> registry_;
};

TEST_F(RegistryTest, FreshFileIsAtTheLatestSchemaVersion) {
  EXPECT_EQ(registry_->schema_version(), static_cast<int>(SchemaMigrations().size()));
  EXPECT_TRUE(registry_->ListApps().empty());
  EXPECT_TRUE(registry_->ListModels().empty());
}

TEST_F(RegistryTest, PutAppCreatesThenReplacesDefaults) {
  AppRecord app{"fashion", {}};
  app.defaults.latency_ms = 50;
  app.defaults.min_accuracy = 0.8;
  ASSERT_TRUE(registry_->PutApp(app).ok());
  auto got = registry_->GetApp("fashion");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->defaults.latency_ms, 50);
  EXPECT_EQ(got->defaults.min_accuracy, 0.8);
  EXPECT_FALSE(got->defaults.max_cost.has_value());

  app.defaults.latency_ms.reset();  // an upsert replaces every default
  app.defaults.max_cost = 0.05;
  ASSERT_TRUE(registry_->PutApp(app).ok());
  got = registry_->GetApp("fashion");
  EXPECT_FALSE(got->defaults.latency_ms.has_value());
  EXPECT_EQ(got->defaults.min_accuracy, 0.8);
  EXPECT_EQ(got->defaults.max_cost, 0.05);

  ASSERT_TRUE(registry_->PutApp({"audio", {}}).ok());
  std::vector<std::string> names;
  for (const auto& a : registry_->ListApps()) names.push_back(a.name);
  EXPECT_THAT(names, ElementsAre("audio", "fashion"));
  EXPECT_EQ(registry_->GetApp("video").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RegistryTest, MaxAccuracyDropRoundTripsAndIsUnsetByDefault) {
  AppRecord app{"fashion", {}};
  app.defaults.latency_ms = 50;
  ASSERT_TRUE(registry_->PutApp(app).ok());
  auto got = registry_->GetApp("fashion");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->max_accuracy_drop.has_value());

  // Exact, like every stored double; 0 (no scaling) and 1 are both kept.
  for (double drop : {0.0, 0.1 + 0.2, 1.0}) {
    app.max_accuracy_drop = drop;
    ASSERT_TRUE(registry_->PutApp(app).ok());
    got = registry_->GetApp("fashion");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->max_accuracy_drop, drop);
    EXPECT_EQ(got->defaults.latency_ms, 50);
    std::vector<AppRecord> listed = registry_->ListApps();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].max_accuracy_drop, drop);
  }

  // An upsert without it clears it, as it does the defaults.
  app.max_accuracy_drop.reset();
  ASSERT_TRUE(registry_->PutApp(app).ok());
  EXPECT_FALSE(registry_->GetApp("fashion")->max_accuracy_drop.has_value());
}

TEST_F(RegistryTest, PutAppRejectsAMaxAccuracyDropOutsideZeroToOne) {
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    AppRecord app{"fashion", {}};
    app.max_accuracy_drop = bad;
    absl::Status s = registry_->PutApp(app);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("max_accuracy_drop"));
  }
  EXPECT_TRUE(registry_->ListApps().empty());
}

TEST_F(RegistryTest, PutAppRejectsNonsenseDefaults) {
  AppRecord app{"fashion", {}};
  app.defaults.min_accuracy = 1.5;
  EXPECT_EQ(registry_->PutApp(app).code(), absl::StatusCode::kInvalidArgument);
  app.defaults.min_accuracy.reset();
  app.defaults.latency_ms = -1;
  EXPECT_EQ(registry_->PutApp(app).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry_->ListApps().empty());
}

TEST(ValidateNameTest, AllowsTheUrlSafeSetUpTo128Characters) {
  for (const std::string& ok : std::vector<std::string>{"a", "fmnist-cnn", "torch-int8",
                                                        "v1.2_beta", std::string(128, 'x')}) {
    EXPECT_TRUE(ValidateName("name", ok).ok()) << ok;
  }
  for (const std::string& bad : std::vector<std::string>{"", "a b", "a/b", "m:v", "../x", "é",
                                                         "x'--", std::string(129, 'x')}) {
    absl::Status s = ValidateName("model name", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("model name"));
  }
}

TEST_F(RegistryTest, BadNamesAreRefusedEverywhere) {
  EXPECT_EQ(registry_->PutApp({"bad app", {}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->RegisterModel(MakeModel("fashion", "bad/name", "x"), {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->RegisterModel(MakeModel("fash:ion", "m", "x"), {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      registry_->RegisterModel(MakeModel("fashion", "m", "x"), {MakeVariant("m", "a b")}).code(),
      absl::StatusCode::kInvalidArgument);
  Register("fashion", "m");
  EXPECT_EQ(registry_->PutProfile(MakeProfile("m", "torch", "cpu 1")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, RegisterCreatesTheAppTheModelAndItsVariants) {
  ModelRecord model = MakeModel("fashion", "fmnist-mlp", "mlp-bytes");
  model.onnx_blob = FakeBlob("mlp-onnx");
  model.valset_blob = FakeBlob("valset");
  model.spec.declared_accuracy = 0.9;
  std::vector<VariantRecord> variants = {MakeVariant("fmnist-mlp", "torch"),
                                         MakeVariant("fmnist-mlp", "opencv", Runtime::kOpenCv)};
  variants[1].state = VariantState::kPending;
  variants[1].detail = "profiling 3/7";
  variants[1].accuracy_source = AccuracySource::kDeclared;
  ASSERT_TRUE(registry_->RegisterModel(model, variants).ok());

  auto app = registry_->GetApp("fashion");
  ASSERT_TRUE(app.ok());
  EXPECT_FALSE(app->defaults.latency_ms.has_value());

  auto got = registry_->GetModel("fmnist-mlp");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->app, "fashion");
  EXPECT_EQ(ModelSpecToJson(got->spec), ModelSpecToJson(model.spec));
  EXPECT_EQ(got->source_blob, model.source_blob);
  EXPECT_EQ(got->onnx_blob, model.onnx_blob);
  EXPECT_EQ(got->valset_blob, model.valset_blob);
  EXPECT_EQ(got->created_unix_ms, model.created_unix_ms);

  auto listed = registry_->ListVariants("fmnist-mlp");
  ASSERT_EQ(listed.size(), 2u);  // ordered by variant name
  ExpectSameVariant(listed[0], variants[1]);
  ExpectSameVariant(listed[1], variants[0]);
  auto one = registry_->GetVariant({"fmnist-mlp", "opencv"});
  ASSERT_TRUE(one.ok());
  ExpectSameVariant(*one, variants[1]);
}

TEST_F(RegistryTest, VariantsMayOmitTheirModelName) {
  VariantRecord v = MakeVariant("", "torch");
  ASSERT_TRUE(registry_->RegisterModel(MakeModel("fashion", "m", "x"), {v}).ok());
  EXPECT_TRUE(registry_->GetVariant({"m", "torch"}).ok());
}

TEST_F(RegistryTest, RegisterRefusesInvalidRecordsAndStoresNothing) {
  ModelRecord no_blob = MakeModel("fashion", "m", "x");
  no_blob.source_blob = "";
  ModelRecord bad_blob = MakeModel("fashion", "m", "x");
  bad_blob.onnx_blob = "not-a-hash";
  ModelRecord no_inputs = MakeModel("fashion", "m", "x");
  no_inputs.spec.inputs.clear();
  for (const ModelRecord& m : {no_blob, bad_blob, no_inputs}) {
    EXPECT_EQ(registry_->RegisterModel(m, {}).code(), absl::StatusCode::kInvalidArgument);
  }
  ModelRecord ok = MakeModel("fashion", "m", "x");
  EXPECT_EQ(registry_->RegisterModel(ok, {MakeVariant("other", "torch")}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      registry_->RegisterModel(ok, {MakeVariant("m", "torch"), MakeVariant("m", "torch")}).code(),
      absl::StatusCode::kInvalidArgument);
  VariantRecord inaccurate = MakeVariant("m", "torch");
  inaccurate.accuracy = 87.5;  // a percentage, not a fraction
  EXPECT_EQ(registry_->RegisterModel(ok, {inaccurate}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry_->ListApps().empty());
  EXPECT_TRUE(registry_->ListModels().empty());
}

TEST_F(RegistryTest, RegisteringTheSameBytesAgainChangesNothing) {
  Register("fashion", "m", "bytes");
  ASSERT_TRUE(registry_->PutProfile(MakeProfile("m", "torch", "cpu-1")).ok());

  ModelRecord again = MakeModel("fashion", "m", "bytes");
  again.created_unix_ms = 1800000000000;
  ASSERT_TRUE(registry_->RegisterModel(again, {MakeVariant("m", "torch-int8")}).ok());

  EXPECT_EQ(registry_->GetModel("m")->created_unix_ms, 1700000000000);
  EXPECT_THAT(VariantIds(registry_->ListVariants("m")), ElementsAre("m:opencv", "m:torch"));
  EXPECT_EQ(registry_->ListProfiles("m").size(), 1u);
}

TEST_F(RegistryTest, ModelNamesAreGlobalAcrossApps) {
  Register("fashion", "shared-name", "bytes");
  absl::Status s = registry_->RegisterModel(MakeModel("audio", "shared-name", "bytes"), {});
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("\"fashion\""));
  EXPECT_THAT(s.message(), HasSubstr("/v2/models/{name}"));
  // The loser changed nothing, not even by creating its app.
  EXPECT_EQ(registry_->GetModel("shared-name")->app, "fashion");
  EXPECT_EQ(registry_->GetApp("audio").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->ListVariants("shared-name").size(), 2u);
}

TEST_F(RegistryTest, NewBytesReplaceTheModelItsVariantsAndProfiles) {
  Register("fashion", "m", "old bytes");
  ASSERT_TRUE(registry_->PutProfile(MakeProfile("m", "torch", "cpu-1")).ok());
  ASSERT_TRUE(registry_->PutProfile(MakeProfile("m", "opencv", "cpu-2")).ok());

  ModelRecord replacement = MakeModel("fashion", "m", "new bytes");
  ASSERT_TRUE(registry_->RegisterModel(replacement, {MakeVariant("m", "torch-opt")}).ok());

  EXPECT_EQ(registry_->GetModel("m")->source_blob, FakeBlob("new bytes"));
  EXPECT_THAT(VariantIds(registry_->ListVariants("m")), ElementsAre("m:torch-opt"));
  EXPECT_TRUE(registry_->ListProfiles("m").empty());
  EXPECT_EQ(CountRows("profile_points"), 0);
}

TEST_F(RegistryTest, ListModelsFiltersByApp) {
  Register("fashion", "b-model");
  Register("fashion", "a-model");
  Register("audio", "c-model");
  std::vector<std::string> all, fashion;
  for (const auto& m : registry_->ListModels()) all.push_back(m.name);
  for (const auto& m : registry_->ListModels("fashion")) fashion.push_back(m.name);
  EXPECT_THAT(all, ElementsAre("a-model", "b-model", "c-model"));
  EXPECT_THAT(fashion, ElementsAre("a-model", "b-model"));
  EXPECT_TRUE(registry_->ListModels("video").empty());
  // Parameters are bound, never spliced into SQL.
  EXPECT_TRUE(registry_->ListModels("' OR 1=1 --").empty());
  EXPECT_EQ(registry_->GetModel("x' OR '1'='1").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RegistryTest, PutVariantUpsertsAndKeepsProfiles) {
  Register("fashion", "m");
  ASSERT_TRUE(registry_->PutProfile(MakeProfile("m", "torch", "cpu-1")).ok());

  VariantRecord v = MakeVariant("m", "torch");
  v.state = VariantState::kFailed;
  v.detail = "executor refused the file";
  v.accuracy = 0.5;
  ASSERT_TRUE(registry_->PutVariant(v).ok());
  ExpectSameVariant(*registry_->GetVariant({"m", "torch"}), v);
  EXPECT_EQ(registry_->ListProfiles("m").size(), 1u);  // an update is not a delete

  VariantRecord added = MakeVariant("m", "torch-int8");
  added.blob = "";  // not generated yet
  added.state = VariantState::kPending;
  ASSERT_TRUE(registry_->PutVariant(added).ok());
  EXPECT_THAT(VariantIds(registry_->ListVariants("m")),
              ElementsAre("m:opencv", "m:torch", "m:torch-int8"));

  absl::Status s = registry_->PutVariant(MakeVariant("ghost", "torch"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("ghost"));
  EXPECT_EQ(registry_->GetVariant({"m", "nope"}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RegistryTest, ListVariantsSpansModels) {
  Register("fashion", "b");
  Register("fashion", "a");
  EXPECT_THAT(VariantIds(registry_->ListVariants()),
              ElementsAre("a:opencv", "a:torch", "b:opencv", "b:torch"));
  EXPECT_TRUE(registry_->ListVariants("c").empty());
}

TEST_F(RegistryTest, ProfilePointsRoundTripExactly) {
  Register("fashion", "m");
  std::vector<LatencyPoint> points = {
      {1, 0.1 + 0.2, 0.30000000000000004},  // not representable in short decimal
      {3, 1.0 / 3.0, 2.0 / 3.0},
      {8, 12345.678901234567, 12345.678901234568},
      {64, 1e-3 * 7919, 1e300},
  };
  ProfileRecord p;
  p.key = {"m", "torch"};
  p.worker_type = "cpu-2";
  p.accuracy = 0.91234567890123456;
  p.profile = *Profile::Create(points, /*load_ms=*/std::acos(-1.0), /*memory_mb=*/1.0 / 7.0);
  ASSERT_TRUE(registry_->PutProfile(p).ok());
  auto listed = registry_->ListProfiles("m");
  ASSERT_EQ(listed.size(), 1u);
  ExpectSameProfile(listed[0], p);
}

TEST_F(RegistryTest, PutProfileReplacesEveryPoint) {
  Register("fashion", "m");
  ASSERT_TRUE(registry_->PutProfile(MakeProfile("m", "torch", "cpu-1", 1.0, 64)).ok());
  ProfileRecord shorter = MakeProfile("m", "torch", "cpu-1", 2.0, 4);  // stopped early
  ASSERT_TRUE(registry_->PutProfile(shorter).ok());
  auto listed = registry_->ListProfiles("m");
  ASSERT_EQ(listed.size(), 1u);
  ExpectSameProfile(listed[0], shorter);
  EXPECT_EQ(CountRows("profile_points"), 3);
}

TEST_F(RegistryTest, SweepsLeftRoundTripAndImportsAreFinal) {
  Register("fashion", "m");
  ProfileRecord refining = MakeProfile("m", "torch", "cpu-1", 1.0);
  refining.sweeps_left = 2;
  ASSERT_TRUE(registry_->PutProfile(refining).ok());
  ASSERT_EQ(registry_->ListProfiles("m").size(), 1u);
  ExpectSameProfile(registry_->ListProfiles("m")[0], refining);
  // A profile read from CSV carries no sweeps: importing it makes it final.
  auto parsed = ParseProfileCsv(WriteProfileCsv({refining}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(registry_->ImportProfiles(*parsed).ok());
  EXPECT_EQ(registry_->ListProfiles("m")[0].sweeps_left, 0);
  refining.sweeps_left = -1;
  EXPECT_EQ(registry_->PutProfile(refining).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, ASweepDoesNotOverwriteAProfileWrittenSinceItWasRead) {
  Register("fashion", "m");
  ProfileRecord first = MakeProfile("m", "torch", "cpu-1", 1.0);
  first.sweeps_left = 2;
  // A first sweep stores only where no profile is.
  ASSERT_TRUE(registry_->PutProfileIfUnchanged(first, Registry::kNoStoredProfile).ok());
  EXPECT_EQ(registry_->PutProfileIfUnchanged(first, Registry::kNoStoredProfile).code(),
            absl::StatusCode::kFailedPrecondition);
  // A later sweep read the profile with 2 sweeps left; it lands.
  ProfileRecord second = MakeProfile("m", "torch", "cpu-1", 0.9);
  second.sweeps_left = 1;
  ASSERT_TRUE(registry_->PutProfileIfUnchanged(second, 2).ok());
  // An import lands while the third sweep runs; the sweep read 1 and is refused.
  ProfileRecord imported = MakeProfile("m", "torch", "cpu-1", 5.0);
  ASSERT_TRUE(registry_->ImportProfiles({imported}).ok());
  ProfileRecord third = MakeProfile("m", "torch", "cpu-1", 0.8);
  absl::Status refused = registry_->PutProfileIfUnchanged(third, 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("m:torch on cpu-1"));
  ASSERT_EQ(registry_->ListProfiles("m").size(), 1u);
  ExpectSameProfile(registry_->ListProfiles("m")[0], imported);
  // The variant must still exist, whatever is expected.
  EXPECT_EQ(registry_->PutProfileIfUnchanged(MakeProfile("m", "ghost", "cpu-1"),
                                             Registry::kNoStoredProfile).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RegistryTest, PutProfileNeedsAVariantAndPoints) {
  Register("fashion", "m");
  EXPECT_EQ(registry_->PutProfile(MakeProfile("m", "ghost", "cpu-1")).code(),
            absl::StatusCode::kNotFound);
  ProfileRecord empty;
  empty.key = {"m", "torch"};
  empty.worker_type = "cpu-1";
  EXPECT_EQ(registry_->PutProfile(empty).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, ListProfilesOrdersByModelVariantAndWorkerType) {
  Register("fashion", "b");
  Register("fashion", "a");
  for (const char* model : {"b", "a"}) {
    for (const char* variant : {"torch", "opencv"}) {
      for (const char* type : {"cpu-2", "cpu-1"}) {
        ASSERT_TRUE(registry_->PutProfile(MakeProfile(model, variant, type)).ok());
      }
    }
  }
  std::vector<std::string> order;
  for (const auto& p : registry_->ListProfiles())
    order.push_back(p.key.ToString() + "@" + p.worker_type);
  EXPECT_THAT(order,
              ElementsAre("a:opencv@cpu-1", "a:opencv@cpu-2", "a:torch@cpu-1", "a:torch@cpu-2",
                          "b:opencv@cpu-1", "b:opencv@cpu-2", "b:torch@cpu-1", "b:torch@cpu-2"));
  EXPECT_EQ(registry_->ListProfiles("a").size(), 4u);
}

TEST_F(RegistryTest, ImportStoresProfilesFromCsv) {
  Register("fashion", "m");
  std::vector<ProfileRecord> source = {MakeProfile("m", "torch", "cpu-1", 1.0),
                                       MakeProfile("m", "opencv", "cpu-2", 3.0)};
  auto parsed = ParseProfileCsv(WriteProfileCsv(source));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto stored = registry_->ImportProfiles(*parsed);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, 2);
  EXPECT_EQ(registry_->ListProfiles("m").size(), 2u);
}

TEST_F(RegistryTest, ImportWithUnknownVariantsStoresNothing) {
  Register("fashion", "m");
  std::vector<ProfileRecord> batch = {MakeProfile("m", "torch", "cpu-1"),
                                      MakeProfile("m", "torch-int8", "cpu-1"),
                                      MakeProfile("other", "torch", "cpu-2")};
  auto stored = registry_->ImportProfiles(batch);
  EXPECT_EQ(stored.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(stored.status().message(), HasSubstr("m:torch-int8"));
  EXPECT_THAT(stored.status().message(), HasSubstr("other:torch"));
  EXPECT_THAT(stored.status().message(), ::testing::Not(HasSubstr("m:torch,")));
  EXPECT_TRUE(registry_->ListProfiles().empty());  // not even the known one
  EXPECT_EQ(CountRows("profiles"), 0);
}

TEST_F(RegistryTest, DeleteModelCascadesAndFreesTheName) {
  Register("fashion", "m");
  Register("fashion", "keep");
  ASSERT_TRUE(registry_->PutProfile(MakeProfile("m", "torch", "cpu-1")).ok());
  ASSERT_TRUE(registry_->PutProfile(MakeProfile("keep", "torch", "cpu-1")).ok());

  ASSERT_TRUE(registry_->DeleteModel("m").ok());
  EXPECT_EQ(registry_->GetModel("m").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry_->ListVariants("m").empty());
  EXPECT_TRUE(registry_->ListProfiles("m").empty());
  EXPECT_EQ(CountRows("variants"), 2);
  EXPECT_EQ(CountRows("profiles"), 1);
  EXPECT_EQ(CountRows("profile_points"), 7);
  EXPECT_TRUE(registry_->GetApp("fashion").ok());  // the app stays

  EXPECT_EQ(registry_->DeleteModel("m").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry_->RegisterModel(MakeModel("audio", "m", "x"), {}).ok());
}

TEST_F(RegistryTest, DeleteAppTakesItsModelsVariantsProfilesAndDefaultsOnly) {
  AppRecord fashion;
  fashion.name = "fashion";
  fashion.defaults.latency_ms = 50;
  ASSERT_TRUE(registry_->PutApp(fashion).ok());
  Register("fashion", "a");
  Register("fashion", "b");
  Register("audio", "c");
  ASSERT_TRUE(registry_->PutProfile(MakeProfile("a", "torch", "cpu-1")).ok());
  ASSERT_TRUE(registry_->PutProfile(MakeProfile("c", "torch", "cpu-1")).ok());

  ASSERT_TRUE(registry_->DeleteApp("fashion").ok());
  EXPECT_TRUE(absl::IsNotFound(registry_->GetApp("fashion").status()));
  EXPECT_TRUE(registry_->ListModels("fashion").empty());
  EXPECT_THAT(VariantIds(registry_->ListVariants()), ElementsAre("c:opencv", "c:torch"));
  EXPECT_EQ(CountRows("apps"), 1);
  EXPECT_EQ(CountRows("models"), 1);
  EXPECT_EQ(CountRows("profiles"), 1);
  EXPECT_EQ(CountRows("profile_points"), 7);
  EXPECT_TRUE(absl::IsNotFound(registry_->DeleteApp("fashion")));

  // Deleted stays deleted in the file.
  registry_.reset();
  auto reopened = Registry::Open({tmp_.File("registry.db")});
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_TRUE(absl::IsNotFound((*reopened)->GetApp("fashion").status()));
  EXPECT_TRUE(absl::IsNotFound((*reopened)->GetModel("a").status()));
  EXPECT_TRUE((*reopened)->GetModel("c").ok());
}

TEST_F(RegistryTest, ReferencedBlobsAreEveryModelAndVariantFile) {
  ModelRecord m = MakeModel("fashion", "m", "source");
  m.onnx_blob = FakeBlob("onnx");
  m.valset_blob = FakeBlob("valset");
  ASSERT_TRUE(registry_->RegisterModel(m, {MakeVariant("m", "torch")}).ok());
  EXPECT_THAT(registry_->ReferencedBlobs(),
              ::testing::UnorderedElementsAre(FakeBlob("source"), FakeBlob("onnx"),
                                              FakeBlob("valset"), FakeBlob("m:torch")));
  ASSERT_TRUE(registry_->DeleteModel("m").ok());
  EXPECT_TRUE(registry_->ReferencedBlobs().empty());
}

TEST(VariantStateTest, NamesRoundTrip) {
  for (VariantState s : {VariantState::kPending, VariantState::kReady, VariantState::kFailed}) {
    auto parsed = ParseVariantState(VariantStateName(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(VariantStateName(VariantState::kReady), "ready");
  EXPECT_FALSE(ParseVariantState("loading").ok());
}

}  // namespace
}  // namespace maitre::registry
