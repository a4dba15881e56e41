#include "core/profile_csv.h"

#include <map>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace maitre {

std::string WriteProfileCsv(const std::vector<ProfileRecord>& records) {
  std::string out = absl::StrCat(kProfileCsvHeader, "\n");
  for (const ProfileRecord& r : records) {
    for (const LatencyPoint& p : r.profile.points()) {
      absl::StrAppendFormat(&out, "%s,%s,%s,%d,%.4f,%.4f,%.3f,%.2f,%.5f\n", r.key.model,
                            r.key.variant, r.worker_type, p.batch, p.p50_ms, p.p99_ms,
                            r.profile.load_ms(), r.profile.memory_mb(), r.accuracy);
    }
  }
  return out;
}

absl::StatusOr<std::vector<ProfileRecord>> ParseProfileCsv(absl::string_view text) {
  struct Pending {
    std::vector<LatencyPoint> points;
    double load_ms = 0, memory_mb = 0, accuracy = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Pending> groups;
  int line_no = 0;
  bool header_seen = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    if (!header_seen) {
      if (line != kProfileCsvHeader) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_no, ": expected the header \"", kProfileCsvHeader, "\""));
      }
      header_seen = true;
      continue;
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    LatencyPoint p;
    double load = 0, memory = 0, accuracy = 0;
    if (f.size() != 9 || f[0].empty() || f[1].empty() || f[2].empty() ||
        !absl::SimpleAtoi(f[3], &p.batch) || !absl::SimpleAtod(f[4], &p.p50_ms) ||
        !absl::SimpleAtod(f[5], &p.p99_ms) || !absl::SimpleAtod(f[6], &load) ||
        !absl::SimpleAtod(f[7], &memory) || !absl::SimpleAtod(f[8], &accuracy)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": expected 9 fields (", kProfileCsvHeader, ")"));
    }
    Pending& g = groups[{std::string(f[0]), std::string(f[1]), std::string(f[2])}];
    g.points.push_back(p);
    g.load_ms = load;
    g.memory_mb = memory;
    g.accuracy = accuracy;
  }
  if (!header_seen) return absl::InvalidArgumentError("the profile CSV is empty");
  std::vector<ProfileRecord> records;
  for (auto& [key, g] : groups) {
    auto profile = Profile::Create(std::move(g.points), g.load_ms, g.memory_mb);
    if (!profile.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(std::get<0>(key), ":", std::get<1>(key), " on ",
                                                     std::get<2>(key), ": ",
                                                     profile.status().message()));
    }
    records.push_back(ProfileRecord{{std::get<0>(key), std::get<1>(key)},
                                    std::get<2>(key),
                                    g.accuracy,
                                    *std::move(profile)});
  }
  return records;
}

}  // namespace maitre
