// Transport: how the load generator sends one inference request and learns
// its outcome, whatever the wire (HTTP with JSON or binary tensors, or
// gRPC). Payloads are built once per input row when the transport is made,
// so Start() does no encoding and the client's own cost stays small next to
// what it measures.
//
// Thread-safety: Start() may be called from any thread at once, including
// from inside a completion callback. Shutdown() must not be called from a
// callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/clock.h"
#include "core/tensor.h"
#include "core/time.h"
#include "loadgen/codec.h"

namespace maitre::loadgen {

enum class Protocol { kHttpJson, kHttpBinary, kGrpc };

// "http" | "http-binary" | "grpc"
absl::string_view ProtocolName(Protocol protocol);
absl::StatusOr<Protocol> ParseProtocol(absl::string_view name);

// What a request is addressed to: exactly one of model and app.
struct Target {
  std::string model;  // a registered model or a variant id
  std::string app;    // a model-less query to an app
  // Sent with every request (for apps these are requirements; for a model
  // they are sent only when set, and Maitre ignores them).
  std::optional<double> latency_ms;
  std::optional<double> min_accuracy;
  std::optional<double> max_cost;
  // An API key, sent with every request as "Authorization: Bearer <key>"
  // (gRPC: "authorization" metadata) when set (docs/operations.md, "API keys").
  std::string api_key;
};

struct CallResult {
  bool ok = false;  // a 2xx / gRPC OK answer that parsed
  // Groups failures in the report: "http 503", "grpc UNAVAILABLE",
  // "timeout", "connection", "bad answer". Empty when ok.
  std::string error_kind;
  std::string error_message;  // one sentence from the server or the client
  Nanos sent_at = 0;          // when the request left the client
  Nanos done_at = 0;          // when its answer (or the failure) arrived
  ServerTimings server;       // from the answer's parameters, when ok
};

using CallCallback = std::function<void(CallResult)>;

class Transport {
 public:
  virtual ~Transport() = default;

  // How many distinct payloads there are; Start() takes an index below it.
  virtual size_t num_payloads() const = 0;

  // Sends payload `index` and returns without waiting. `done` runs exactly
  // once, on a transport thread, unless Shutdown() comes first.
  virtual void Start(size_t index, CallCallback done) = 0;

  // Abandons whatever is in flight and stops the transport's threads; no
  // callback runs after it returns. Idempotent.
  virtual void Shutdown() = 0;

  // Connections opened: HTTP's as they grew; gRPC's channels.
  virtual int64_t connections_opened() const = 0;
};

struct HttpTransportOptions {
  std::string address = "127.0.0.1:8000";  // host:port
  std::string path_prefix;                 // from a base URL such as http://h/api
  bool binary = false;                     // the binary-data extension
  int io_threads = 1;
  int max_connections = 1024;
  Nanos timeout = 30 * kSecond;
  const Clock* clock = nullptr;  // null: SteadyClock
};

// POSTs to /v2/models/{model}/infer or /v2/apps/{app}/infer. `rows` holds
// one request's inputs per entry.
absl::StatusOr<std::unique_ptr<Transport>> CreateHttpTransport(
    const HttpTransportOptions& options, const Target& target,
    const std::vector<std::vector<Tensor>>& rows);

struct GrpcTransportOptions {
  std::string address = "127.0.0.1:8001";  // host:port
  // Channels, each its own HTTP/2 connection, that calls take in turn. One
  // is how most gRPC clients talk to a server; more spread the load over
  // several connections, as HTTP's client does with one per query in flight.
  int channels = 1;
  Nanos timeout = 30 * kSecond;
  // Creation waits this long for the channel to connect, so an address
  // where nothing listens is an error up front; 0 skips the wait.
  Nanos connect_timeout = 5 * kSecond;
  const Clock* clock = nullptr;  // null: SteadyClock
};

// inference.GRPCInferenceService/ModelInfer through the callback API. For
// an app, model_name is left empty and parameters carry maitre_app plus the
// requirements (docs/api.md, "gRPC").
absl::StatusOr<std::unique_ptr<Transport>> CreateGrpcTransport(
    const GrpcTransportOptions& options, const Target& target,
    const std::vector<std::vector<Tensor>>& rows);

}  // namespace maitre::loadgen
