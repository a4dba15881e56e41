#include "metrics/naming.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace maitre::metrics {
namespace {

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

bool MatchesNameGrammar(absl::string_view name) {
  if (name.empty() || !IsNameStart(name[0])) return false;
  return std::all_of(name.begin(), name.end(), IsNameChar);
}

// promtool's camelCase test: a lower-case letter followed by an upper-case one.
bool HasCamelCase(absl::string_view name) {
  for (size_t i = 1; i < name.size(); ++i) {
    if (std::islower(static_cast<unsigned char>(name[i - 1])) &&
        std::isupper(static_cast<unsigned char>(name[i]))) {
      return true;
    }
  }
  return false;
}

// The base units promtool knows, and the SI/IEC prefixes it rejects on them.
constexpr absl::string_view kBaseUnits[] = {"seconds", "bytes",   "meters", "metres",  "grams",
                                            "joules",  "volts",   "amperes", "celsius", "kelvin"};
constexpr absl::string_view kUnitPrefixes[] = {"pico", "nano", "micro", "milli", "centi", "deci",
                                               "deca", "hecto", "kilo", "kibi", "mega", "mibi",
                                               "giga", "gibi", "tera", "tebi", "peta", "pebi"};
constexpr absl::string_view kTimeUnits[] = {"minutes", "hours", "days", "weeks"};
constexpr absl::string_view kUnitAbbreviations[] = {"s",  "ms", "us", "ns", "sec", "b", "kb",
                                                    "mb", "gb", "tb", "pb", "m",   "h", "d"};
constexpr absl::string_view kTypeWords[] = {"counter", "gauge", "histogram", "summary"};

// If `word` is a scaled or non-base unit, the base unit to use instead.
absl::string_view BaseUnitFor(absl::string_view word) {
  for (absl::string_view unit : kTimeUnits) {
    if (word == unit) return "seconds";
  }
  for (absl::string_view base : kBaseUnits) {
    if (!absl::EndsWith(word, base)) continue;
    absl::string_view prefix = word.substr(0, word.size() - base.size());
    for (absl::string_view p : kUnitPrefixes) {
      if (prefix == p) return base;
    }
  }
  return {};
}

}  // namespace

absl::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

absl::Status ValidateMetricName(absl::string_view name, MetricType type) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("metric name '", name, "': ", why));
  };
  if (name.find(':') != absl::string_view::npos) {
    return bad("':' is reserved for recording rules; use '_'");
  }
  if (!MatchesNameGrammar(name)) {
    return bad("must match [a-zA-Z_][a-zA-Z0-9_]*");
  }
  if (HasCamelCase(name)) return bad("write it in snake_case, not camelCase");
  bool ends_total = absl::EndsWith(name, "_total");
  if (type == MetricType::kCounter && !ends_total) {
    return bad("a counter's name ends in \"_total\"");
  }
  if (type != MetricType::kCounter && ends_total) {
    return bad("only counters end in \"_total\"");
  }
  if (type != MetricType::kHistogram) {
    for (absl::string_view suffix : {"_bucket", "_count", "_sum"}) {
      if (absl::EndsWith(name, suffix)) {
        return bad(absl::StrCat("\"", suffix, "\" is reserved for histogram series"));
      }
    }
  }
  std::vector<absl::string_view> words = absl::StrSplit(name, '_');
  for (size_t i = 0; i < words.size(); ++i) {
    absl::string_view base = BaseUnitFor(words[i]);
    if (!base.empty()) {
      return bad(absl::StrCat("use the base unit \"", base, "\" instead of \"", words[i], "\""));
    }
    // promtool looks for these only after the first word ("ms_..." passes).
    if (i == 0) continue;
    std::string lower = absl::AsciiStrToLower(words[i]);
    for (absl::string_view abbreviation : kUnitAbbreviations) {
      if (lower == abbreviation) {
        return bad(absl::StrCat("spell the unit out (\"_", words[i], "\" is an abbreviation)"));
      }
    }
    for (absl::string_view type_word : kTypeWords) {
      if (lower == type_word) return bad("the name should not include the metric type");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelNames(const std::vector<std::string>& label_names) {
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("label name '", label, "': ", why));
    };
    if (!MatchesNameGrammar(label)) return bad("must match [a-zA-Z_][a-zA-Z0-9_]*");
    if (absl::StartsWith(label, "__")) return bad("names starting with \"__\" are reserved");
    if (HasCamelCase(label)) return bad("write it in snake_case, not camelCase");
    if (label == "le") return bad("\"le\" is reserved for histogram buckets");
    if (label == "quantile") return bad("\"quantile\" is reserved for summaries");
    for (size_t j = 0; j < i; ++j) {
      if (label_names[j] == label) return bad("appears twice");
    }
  }
  return absl::OkStatus();
}

}  // namespace maitre::metrics
