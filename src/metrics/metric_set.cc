#include "metrics/metric_set.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "metrics/text_format.h"

namespace maitre::metrics {

void CollectedFamily::AppendSamples(const Collector& scrape, std::string* out) const {
  const Collector::Samples* samples = scrape.SamplesFor(this);
  if (samples == nullptr) return;
  std::string value;
  for (const auto& [labels, sample] : *samples) {
    value.clear();
    AppendDouble(sample, &value);
    AppendSample(info().name, "", info().label_names, labels, "", "", value, out);
  }
}

double& Collector::Slot(const CollectedFamily* family, LabelValues label_values) {
  if (family == nullptr || family->owner_ != metric_set_) {
    internal::Die("Collector: the family was not declared in the metric_set being scraped");
  }
  absl::StatusOr<std::vector<std::string>> key = family->Key(label_values);
  if (!key.ok()) internal::Die(std::string(key.status().message()));
  return samples_[family][*std::move(key)];
}

void Collector::Set(const CollectedFamily* family, LabelValues label_values, double value) {
  Slot(family, label_values) = value;
}

void Collector::Add(const CollectedFamily* family, LabelValues label_values, double delta) {
  Slot(family, label_values) += delta;
}

const Collector::Samples* Collector::SamplesFor(const CollectedFamily* family) const {
  auto it = samples_.find(family);
  return it == samples_.end() ? nullptr : &it->second;
}

MetricSet::~MetricSet() = default;

absl::Status MetricSet::CheckFamily(absl::string_view name, absl::string_view help,
                                   const std::vector<std::string>& label_names,
                                   MetricType type) const {
  absl::Status status = ValidateMetricName(name, type);
  if (!status.ok()) return status;
  status = ValidateLabelNames(label_names);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("metric '", name, "': ", status.message()));
  }
  if (help.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric '", name, "': help text is required (promtool rejects it without)"));
  }
  return absl::OkStatus();
}

void MetricSet::Insert(std::unique_ptr<internal::Family> family, std::vector<std::string> series) {
  for (std::string& s : series) series_names_.insert(std::move(s));
  std::string name = family->info().name;
  families_.emplace(std::move(name), std::move(family));
}

namespace {

absl::Status CheckSeriesFree(const std::set<std::string>& taken,
                             const std::vector<std::string>& series, absl::string_view name) {
  for (const std::string& s : series) {
    if (taken.count(s) != 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("metric '", name, "': series name '", s, "' is already registered"));
    }
  }
  return absl::OkStatus();
}

FamilyInfo MakeInfo(FamilyOptions options, MetricType type) {
  return FamilyInfo{std::move(options.name), SanitizeUtf8(options.help), type,
                    std::move(options.label_names)};
}

}  // namespace

absl::StatusOr<CounterFamily*> MetricSet::AddCounter(FamilyOptions options) {
  absl::MutexLock lock(&mu_);
  absl::Status status =
      CheckFamily(options.name, options.help, options.label_names, MetricType::kCounter);
  if (!status.ok()) return status;
  std::vector<std::string> series = {options.name};
  status = CheckSeriesFree(series_names_, series, options.name);
  if (!status.ok()) return status;
  // The constructor is private to the family and its friend, this class.
  std::unique_ptr<CounterFamily> family(
      new CounterFamily(MakeInfo(std::move(options), MetricType::kCounter)));
  CounterFamily* raw = family.get();
  if (raw->info().label_names.empty()) raw->With();
  Insert(std::move(family), std::move(series));
  return raw;
}

absl::StatusOr<GaugeFamily*> MetricSet::AddGauge(FamilyOptions options) {
  absl::MutexLock lock(&mu_);
  absl::Status status =
      CheckFamily(options.name, options.help, options.label_names, MetricType::kGauge);
  if (!status.ok()) return status;
  std::vector<std::string> series = {options.name};
  status = CheckSeriesFree(series_names_, series, options.name);
  if (!status.ok()) return status;
  std::unique_ptr<GaugeFamily> family(
      new GaugeFamily(MakeInfo(std::move(options), MetricType::kGauge)));
  GaugeFamily* raw = family.get();
  if (raw->info().label_names.empty()) raw->With();
  Insert(std::move(family), std::move(series));
  return raw;
}

absl::StatusOr<HistogramFamily*> MetricSet::AddHistogram(HistogramOptions options) {
  absl::MutexLock lock(&mu_);
  absl::Status status =
      CheckFamily(options.name, options.help, options.label_names, MetricType::kHistogram);
  if (!status.ok()) return status;
  for (size_t i = 0; i < options.bounds.size(); ++i) {
    if (!std::isfinite(options.bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram '", options.name, "': bucket bounds must be finite (+Inf is implicit)"));
    }
    if (i > 0 && !(options.bounds[i - 1] < options.bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram '", options.name, "': bucket bounds must be strictly increasing"));
    }
  }
  std::vector<std::string> series = {options.name, options.name + "_bucket",
                                     options.name + "_sum", options.name + "_count"};
  status = CheckSeriesFree(series_names_, series, options.name);
  if (!status.ok()) return status;
  FamilyInfo info{std::move(options.name), SanitizeUtf8(options.help), MetricType::kHistogram,
                  std::move(options.label_names)};
  std::unique_ptr<HistogramFamily> family(
      new HistogramFamily(std::move(info), std::move(options.bounds)));
  HistogramFamily* raw = family.get();
  if (raw->info().label_names.empty()) raw->With();
  Insert(std::move(family), std::move(series));
  return raw;
}

absl::StatusOr<CollectedFamily*> MetricSet::AddCollected(FamilyOptions options, MetricType type) {
  absl::MutexLock lock(&mu_);
  absl::Status status = CheckFamily(options.name, options.help, options.label_names, type);
  if (!status.ok()) return status;
  std::vector<std::string> series = {options.name};
  status = CheckSeriesFree(series_names_, series, options.name);
  if (!status.ok()) return status;
  std::unique_ptr<CollectedFamily> family(new CollectedFamily(MakeInfo(std::move(options), type)));
  family->owner_ = this;
  CollectedFamily* raw = family.get();
  Insert(std::move(family), std::move(series));
  return raw;
}

absl::StatusOr<CollectedFamily*> MetricSet::AddCollectedGauge(FamilyOptions options) {
  return AddCollected(std::move(options), MetricType::kGauge);
}

absl::StatusOr<CollectedFamily*> MetricSet::AddCollectedCounter(FamilyOptions options) {
  return AddCollected(std::move(options), MetricType::kCounter);
}

CollectorId MetricSet::AddCollector(std::function<void(Collector&)> collect) {
  absl::MutexLock lock(&collectors_mu_);
  CollectorId id = next_collector_id_++;
  if (collect) collectors_.emplace(id, std::move(collect));
  return id;
}

void MetricSet::RemoveCollector(CollectorId id) {
  absl::MutexLock lock(&collectors_mu_);
  collectors_.erase(id);
}

std::string MetricSet::Render() const {
  Collector scrape(this);
  {
    absl::ReaderMutexLock lock(&collectors_mu_);
    for (const auto& [id, collect] : collectors_) collect(scrape);
  }
  // Families are never removed, so the pointers outlive the lock; rendering
  // outside it keeps registration from waiting on a scrape.
  std::vector<const internal::Family*> families;
  {
    absl::ReaderMutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  std::string out;
  for (const internal::Family* family : families) family->Render(scrape, &out);
  return out;
}

}  // namespace maitre::metrics
