// The pipeline's profiling schedule on a manual clock: a real registry,
// catalog and cluster, and one worker whose profiles are scripted (a
// WorkerApi fake; docs/architecture.md, "Conventions"), so that the sweeps'
// figures, and therefore when SweepRule calls a profile final, are known. What
// a real worker measures is covered end to end by tests/e2e_variants_test.cc.
#include "controller/models/variant_pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "controller/registry/blob_store.h"
#include "controller/registry/registry_test_util.h"
#include "core/npz.h"

namespace maitre::controller {
namespace {

// Answers ProfileVariant with the next batch-1 latency of a script (the
// last one repeats); nothing else is asked of it here.
class ScriptedProfiler {
 public:
  explicit ScriptedProfiler(std::vector<double> batch1_ms) : batch1_ms_(std::move(batch1_ms)) {}

  absl::StatusOr<Profile> Next(const ProfileRequest& request) {
    absl::MutexLock lock(&mu_);
    const double ms = batch1_ms_[std::min(calls_, batch1_ms_.size() - 1)];
    ++calls_;
    last_sample_ = request.sample;
    return Profile::Create({{1, ms, 1.1 * ms}, {8, 4 * ms, 4.4 * ms}}, 100, 5);
  }
  size_t calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  // The example row the last profiling request carried.
  std::vector<Tensor> last_sample() const {
    absl::MutexLock lock(&mu_);
    return last_sample_;
  }

 private:
  const std::vector<double> batch1_ms_;
  mutable absl::Mutex mu_;
  size_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Tensor> last_sample_ ABSL_GUARDED_BY(mu_);
};

class ScriptedWorker final : public WorkerApi {
 public:
  explicit ScriptedWorker(ScriptedProfiler* profiler) : profiler_(profiler) {}
  void Infer(const VariantKey&, std::shared_ptr<const std::vector<Tensor>>, const InferOptions&,
             WorkerReplyCallback done) override {
    std::move(done)(absl::UnimplementedError("not used by the pipeline"));
  }
  absl::StatusOr<LoadResult> Load(const VariantSpec&, int,
                                  const std::vector<LatencyPoint>&, int32_t) override {
    return absl::UnimplementedError("not used by the pipeline");
  }
  absl::Status Unload(const VariantKey&) override {
    return absl::UnimplementedError("not used by the pipeline");
  }
  absl::StatusOr<Profile> ProfileVariant(const VariantSpec&,
                                         const ProfileRequest& request) override {
    return profiler_->Next(request);
  }
  absl::StatusOr<Evaluation> Evaluate(const VariantSpec&, const std::string&, int) override {
    return absl::UnimplementedError("not used by the pipeline");
  }
  absl::StatusOr<std::vector<Tensor>> RunOnce(const VariantSpec&,
                                              const std::vector<Tensor>&) override {
    return absl::UnimplementedError("not used by the pipeline");
  }

 private:
  ScriptedProfiler* profiler_;
};

class VariantPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto registry = registry::Registry::Open({dir_.File("registry.db")});
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    auto blobs = registry::BlobStore::Open({dir_.File("blobs")});
    ASSERT_TRUE(blobs.ok()) << blobs.status();
    blobs_ = *std::move(blobs);
    // A validation set of two images: every pixel 0.5 in the first, 0.25
    // in the second.
    Tensor inputs{"inputs", DataType::kFp32, {2, 1, 28, 28}, {}};
    std::vector<float> pixels(2 * 28 * 28, 0.5f);
    std::fill(pixels.begin() + 28 * 28, pixels.end(), 0.25f);
    inputs.data.assign(reinterpret_cast<const char*>(pixels.data()), pixels.size() * 4);
    Tensor labels{"labels", DataType::kInt64, {2}, std::string(16, '\0')};
    auto valset = blobs_->Put(WriteNpz({inputs, labels}));
    ASSERT_TRUE(valset.ok()) << valset.status();
    // An ONNX model has only its registered variant, so the pipeline has
    // nothing to generate or measure: it only profiles.
    registry::ModelRecord model = registry::test_util::MakeModel("fashion", "m", "m");
    model.spec.format = ModelFormat::kOnnx;
    model.valset_blob = *valset;
    absl::Status registered = registry_->RegisterModel(
        model, {registry::test_util::MakeVariant("m", "opencv", Runtime::kOpenCv)});
    ASSERT_TRUE(registered.ok()) << registered;
    ASSERT_TRUE(catalog_.Reload(*registry_).ok());
  }

  // Stopped before the registry it uses goes.
  void TearDown() override { pipeline_.reset(); }

  // A cluster with one cpu-1 worker whose profiles come from `profiler`.
  void StartCluster(ScriptedProfiler* profiler) {
    Cluster::Options cluster;
    cluster.clock = &clock_;
    cluster.connect = [profiler](const std::string&, const std::string&) {
      return std::make_unique<ScriptedWorker>(profiler);
    };
    cluster_ = std::make_unique<Cluster>(cluster);
    ASSERT_TRUE(cluster_->AddWorker("cpu-1", "127.0.0.1:1", 1, "").ok());
  }

  void StartPipeline(Nanos settle_within = SweepRule().settle_within) {
    VariantPipeline::Options options;
    options.registry = registry_.get();
    options.blobs = blobs_.get();
    options.catalog = &catalog_;
    options.cluster = cluster_.get();
    options.clock = &clock_;
    options.profiling.sweeps = SweepRule::ForMinimum(3);  // 3 to 6 sweeps
    options.profiling.sweeps.settle_within = settle_within;
    pipeline_ = std::make_unique<VariantPipeline>(options);
    pipeline_->Start();
    pipeline_->AwaitIdle();
  }

  // Lets the pipeline take every step it can at the clock's time.
  void Settle() {
    pipeline_->Kick();
    pipeline_->AwaitIdle();
  }

  // The stored profile on cpu-1.
  std::optional<ProfileRecord> Stored() const {
    for (ProfileRecord& p : registry_->ListProfiles("m")) {
      if (p.key == kKey && p.worker_type == "cpu-1") return std::move(p);
    }
    return std::nullopt;
  }
  int SweepsLeft() const { return Stored() ? Stored()->sweeps_left : -1; }
  double StoredBatch1Ms() const { return Stored() ? Stored()->profile.LatencyAt(1) : -1; }

  const VariantKey kKey{"m", "opencv"};
  registry::test_util::TempDir dir_;
  ManualClock clock_{1000 * kSecond};
  std::unique_ptr<registry::Registry> registry_;
  std::unique_ptr<registry::BlobStore> blobs_;
  Catalog catalog_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<VariantPipeline> pipeline_;
};

TEST_F(VariantPipelineTest, SweepsComeAMinuteApartUntilTwoAgree) {
  ScriptedProfiler profiler({1.0, 1.02, 1.01});
  StartCluster(&profiler);
  StartPipeline();
  // The first sweep makes the profile usable at once; up to 5 may follow.
  EXPECT_EQ(profiler.calls(), 1u);
  EXPECT_EQ(SweepsLeft(), 5);
  clock_.Advance(59 * kSecond);
  Settle();
  EXPECT_EQ(profiler.calls(), 1u) << "a sweep came before the spacing had passed";
  clock_.Advance(1 * kSecond);
  Settle();
  EXPECT_EQ(profiler.calls(), 2u);
  EXPECT_EQ(SweepsLeft(), 4) << "two sweeps are fewer than the minimum of three";
  clock_.Advance(60 * kSecond);
  Settle();
  EXPECT_EQ(profiler.calls(), 3u);
  EXPECT_EQ(SweepsLeft(), 0) << "the third sweep agreed within 10% and should end it";
  EXPECT_DOUBLE_EQ(StoredBatch1Ms(), 1.0);  // the fastest sweep is kept
  clock_.Advance(10 * 60 * kSecond);
  Settle();
  EXPECT_EQ(profiler.calls(), 3u) << "a final profile was measured again";
}

TEST_F(VariantPipelineTest, ProfilesRunOnTheValidationSetsFirstRow) {
  ScriptedProfiler profiler({1.0});
  StartCluster(&profiler);
  StartPipeline();
  std::vector<Tensor> sample = profiler.last_sample();
  ASSERT_EQ(sample.size(), 1u);
  EXPECT_EQ(sample[0].name, "input");  // the model's input, not the file's array
  EXPECT_EQ(sample[0].shape, (std::vector<int64_t>{1, 1, 28, 28}));
  const float* pixels = sample[0].As<float>();
  EXPECT_TRUE(std::all_of(pixels, pixels + 28 * 28, [](float p) { return p == 0.5f; }));
}

TEST_F(VariantPipelineTest, AProfileThatKeepsMovingStopsAtTheMaximum) {
  // Each sweep 30% slower than the one before: none agrees with the best.
  ScriptedProfiler profiler({1.0, 1.3, 1.6, 1.9, 2.2, 2.5, 2.8});
  StartCluster(&profiler);
  StartPipeline();
  for (int sweep = 2; sweep <= 8; ++sweep) {
    clock_.Advance(60 * kSecond);
    Settle();
  }
  EXPECT_EQ(profiler.calls(), 6u);
  EXPECT_EQ(SweepsLeft(), 0);
  EXPECT_DOUBLE_EQ(StoredBatch1Ms(), 1.0);
}

TEST_F(VariantPipelineTest, AProfileOnABusyHostIsFinalWithinItsTimeBound) {
  // Sweeps that never agree, on a host slow enough that the sixth would
  // come long after the first: the profile is final once the bound has
  // passed, as it stands, without another sweep.
  ScriptedProfiler profiler({1.0, 1.3, 1.6, 1.9});
  StartCluster(&profiler);
  StartPipeline(/*settle_within=*/150 * kSecond);
  clock_.Advance(60 * kSecond);
  Settle();
  clock_.Advance(60 * kSecond);
  Settle();
  ASSERT_EQ(profiler.calls(), 3u);
  EXPECT_EQ(SweepsLeft(), 3) << "the third sweep did not agree";
  clock_.Advance(29 * kSecond);
  Settle();
  EXPECT_EQ(SweepsLeft(), 3) << "final before its time bound";
  clock_.Advance(1 * kSecond);
  Settle();
  EXPECT_EQ(SweepsLeft(), 0);
  EXPECT_EQ(profiler.calls(), 3u) << "settling measured again";
  EXPECT_DOUBLE_EQ(StoredBatch1Ms(), 1.0);
  clock_.Advance(10 * 60 * kSecond);
  Settle();
  EXPECT_EQ(profiler.calls(), 3u) << "a final profile was measured again";
}

TEST_F(VariantPipelineTest, ARestartedPipelineCountsTheSpacingFromItsStart) {
  ScriptedProfiler profiler({1.0});
  StartCluster(&profiler);
  StartPipeline();
  ASSERT_EQ(SweepsLeft(), 5);
  pipeline_.reset();
  // Restarted long after the first sweep: it cannot know when that was, so
  // the next sweep still waits a whole spacing from the restart.
  clock_.Advance(10 * 60 * kSecond);
  StartPipeline();
  EXPECT_EQ(profiler.calls(), 1u);
  clock_.Advance(59 * kSecond);
  Settle();
  EXPECT_EQ(profiler.calls(), 1u);
  clock_.Advance(1 * kSecond);
  Settle();
  EXPECT_EQ(profiler.calls(), 2u);
  EXPECT_EQ(SweepsLeft(), 4);
}

}  // namespace
}  // namespace maitre::controller
