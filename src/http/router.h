// Router: maps (method, path) to a handler and extracts path parameters.
//
// Patterns are '/'-separated segments. A segment is a literal, or {name},
// which matches exactly one non-empty segment (it may contain ':' and '.',
// as in a variant id "fmnist-cnn:torch-opt"). A trailing {name...} matches
// the rest of the path (one or more segments, joined with '/'). Parameters
// are percent-decoded per segment, so "%2F" inside a name stays inside it.
// Matching is exact: "/v2/" does not match "/v2". When several patterns
// match, the one with a literal earliest wins ("/v2/repository/index" beats
// "/v2/{x}/index").
//
// An unknown path is answered 404 {"error": ...}; a known path with another
// method is answered 405 with an Allow header.
//
// Thread-safety: build it with Add() on one thread before the server starts;
// afterwards it is read-only and Route() may run on many threads at once.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/message.h"
#include "http/responder.h"

namespace maitre::http {

using PathParams = std::map<std::string, std::string, std::less<>>;

// Runs on a server io thread: it must not block. `params` lives only for the
// call; copy what a later answer needs. A handler that throws is answered
// 500 by the server.
using Handler = std::function<void(Request&& request, const PathParams& params, Responder respond)>;

class Router {
 public:
  Router();
  ~Router();
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;

  // A malformed pattern or a duplicate (method, pattern) is recorded in
  // status() and the route is not added; Server::Create refuses such a
  // router, so mistakes surface at start-up rather than as 404s.
  void Add(absl::string_view method, absl::string_view pattern, Handler handler);

  // OK, or the first error from Add().
  absl::Status status() const { return status_; }

  // Finds the handler and calls it, or answers 404/405 through `respond`.
  // `raw_path` is the path as it was on the wire (still percent-encoded); the
  // server passes it so that segments are split before decoding. When empty,
  // request.path is matched and parameters are taken from it verbatim.
  // Exceptions thrown by the handler propagate to the caller.
  void Route(Request&& request, Responder respond, absl::string_view raw_path = {}) const;

 private:
  struct Segment {
    enum class Kind { kLiteral, kParam, kRest } kind;
    std::string text;  // the literal, or the parameter's name
  };
  struct Entry {
    std::string method;
    std::string pattern;
    std::vector<Segment> segments;
    Handler handler;
  };

  std::vector<Entry> entries_;
  absl::Status status_;
};

}  // namespace maitre::http
