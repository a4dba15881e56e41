#include "http/router.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace maitre::http {
namespace {

using PathParts = absl::InlinedVector<absl::string_view, 8>;

// "/a/b" -> {"a", "b"}; "/" -> {}; "/a/" -> {"a", ""}.
PathParts SplitPath(absl::string_view path) {
  PathParts parts;
  path.remove_prefix(1);
  if (path.empty()) return parts;
  for (absl::string_view part : absl::StrSplit(path, '/')) parts.push_back(part);
  return parts;
}

}  // namespace

Router::Router() = default;
Router::~Router() = default;
Router::Router(Router&&) noexcept = default;
Router& Router::operator=(Router&&) noexcept = default;

void Router::Add(absl::string_view method, absl::string_view pattern, Handler handler) {
  auto fail = [&](absl::string_view why) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("bad route ", method, " \"", pattern, "\": ", why));
    }
  };
  if (method.empty()) return fail("the method is empty");
  if (!handler) return fail("the handler is empty");
  if (pattern.empty() || pattern[0] != '/') return fail("a pattern must start with '/'");

  Entry entry;
  entry.method = std::string(method);
  entry.pattern = std::string(pattern);
  entry.handler = std::move(handler);
  std::set<std::string, std::less<>> names;
  for (absl::string_view text : SplitPath(pattern)) {
    if (!entry.segments.empty() && entry.segments.back().kind == Segment::Kind::kRest) {
      return fail("{name...} must be the last segment");
    }
    if (text.empty()) return fail("empty segment (a doubled or trailing '/')");
    bool opens = absl::StartsWith(text, "{");
    bool closes = absl::EndsWith(text, "}");
    if (!opens && !closes && text.find_first_of("{}") == absl::string_view::npos) {
      entry.segments.push_back({Segment::Kind::kLiteral, std::string(text)});
      continue;
    }
    if (!opens || !closes || text.size() < 3) {
      return fail("a segment must be a literal or a whole {name}");
    }
    absl::string_view name = text.substr(1, text.size() - 2);
    Segment::Kind kind = Segment::Kind::kParam;
    if (absl::ConsumeSuffix(&name, "...")) kind = Segment::Kind::kRest;
    if (name.empty() || name.find_first_of("{}") != absl::string_view::npos) {
      return fail("a parameter needs a name without braces");
    }
    if (!names.insert(std::string(name)).second) {
      return fail(absl::StrCat("parameter {", name, "} appears twice"));
    }
    entry.segments.push_back({kind, std::string(name)});
  }

  for (const Entry& other : entries_) {
    if (other.method != entry.method || other.segments.size() != entry.segments.size()) continue;
    bool same = true;
    for (size_t i = 0; i < entry.segments.size() && same; ++i) {
      const Segment& a = entry.segments[i];
      const Segment& b = other.segments[i];
      same = a.kind == b.kind && (a.kind != Segment::Kind::kLiteral || a.text == b.text);
    }
    if (same) return fail(absl::StrCat("it duplicates \"", other.pattern, "\""));
  }
  entries_.push_back(std::move(entry));
}

void Router::Route(Request&& request, Responder respond, absl::string_view raw_path) const {
  const bool encoded = !raw_path.empty();
  absl::string_view path = encoded ? raw_path : absl::string_view(request.path);
  if (path.empty() || path[0] != '/') {
    std::move(respond)(Response::Error(
        404, absl::StrCat("no endpoint matches \"", request.path, "\": paths start with '/'")));
    return;
  }
  PathParts parts = SplitPath(path);

  auto matches = [&parts](const std::vector<Segment>& segments) {
    for (size_t i = 0; i < segments.size(); ++i) {
      const Segment& segment = segments[i];
      if (segment.kind == Segment::Kind::kRest) {
        // The rest must be non-empty, like any other parameter.
        return i < parts.size() && !(i + 1 == parts.size() && parts[i].empty());
      }
      if (i >= parts.size()) return false;
      if (segment.kind == Segment::Kind::kLiteral ? parts[i] != segment.text : parts[i].empty()) {
        return false;
      }
    }
    return parts.size() == segments.size();
  };
  // Literal beats parameter beats rest at the first position they differ.
  auto more_specific = [](const Entry& a, const Entry& b) {
    size_t n = std::min(a.segments.size(), b.segments.size());
    for (size_t i = 0; i < n; ++i) {
      if (a.segments[i].kind != b.segments[i].kind) {
        return a.segments[i].kind < b.segments[i].kind;
      }
    }
    return a.segments.size() > b.segments.size();
  };

  const Entry* best = nullptr;
  std::set<absl::string_view> allowed;
  for (const Entry& entry : entries_) {
    if (!matches(entry.segments)) continue;
    if (entry.method != request.method) {
      allowed.insert(entry.method);
      continue;
    }
    if (best == nullptr || more_specific(entry, *best)) best = &entry;
  }

  if (best == nullptr) {
    if (allowed.empty()) {
      std::move(respond)(Response::Error(
          404, absl::StrCat("no endpoint matches ", request.method, " ", request.path)));
      return;
    }
    std::string allow = absl::StrJoin(allowed, ", ");
    Response response =
        Response::Error(405, absl::StrCat("method ", request.method, " is not allowed on ",
                                          request.path, "; allowed: ", allow));
    response.headers.push_back({"Allow", std::move(allow)});
    std::move(respond)(std::move(response));
    return;
  }

  PathParams params;
  for (size_t i = 0; i < best->segments.size(); ++i) {
    const Segment& segment = best->segments[i];
    if (segment.kind == Segment::Kind::kLiteral) continue;
    std::string value = segment.kind == Segment::Kind::kParam
                            ? std::string(parts[i])
                            : absl::StrJoin(parts.begin() + i, parts.end(), "/");
    if (encoded) {
      absl::StatusOr<std::string> decoded = PercentDecode(value, /*plus_is_space=*/false);
      if (!decoded.ok()) {
        std::move(respond)(Response::Error(400, decoded.status().message()));
        return;
      }
      value = *std::move(decoded);
    }
    params.emplace(segment.text, std::move(value));
  }
  best->handler(std::move(request), params, std::move(respond));
}

}  // namespace maitre::http
