// The HTTP transports (JSON and binary tensors) over AsyncHttpClient.
#include <charconv>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "loadgen/async_http_client.h"
#include "loadgen/transport.h"
#include "core/secret_token.h"

namespace maitre::loadgen {
namespace {

int64_t HeaderLength(const http::Response& response) {
  absl::string_view value = response.GetHeader("Inference-Header-Content-Length");
  if (value.empty()) return -1;
  int64_t n = -1;
  auto result = std::from_chars(value.data(), value.data() + value.size(), n);
  if (result.ec != std::errc() || n < 0) return -2;  // present but unreadable
  return n;
}

CallResult ToCallResult(AsyncHttpResult&& r) {
  CallResult out;
  out.sent_at = r.sent_at;
  out.done_at = r.done_at;
  if (!r.transport.ok()) {
    out.error_kind = absl::IsDeadlineExceeded(r.transport) ? "timeout" : "connection";
    out.error_message = std::string(r.transport.message());
    return out;
  }
  const http::Response& response = r.response;
  if (response.status < 200 || response.status > 299) {
    out.error_kind = absl::StrCat("http ", response.status);
    out.error_message = ErrorMessageOf(response.body);
    return out;
  }
  const int64_t json_length = HeaderLength(response);
  if (json_length == -2) {
    out.error_kind = "bad answer";
    out.error_message = "the answer's Inference-Header-Content-Length is not a number";
    return out;
  }
  auto timings = ParseResponseTimings(response.body, json_length);
  if (!timings.ok()) {
    out.error_kind = "bad answer";
    out.error_message = std::string(timings.status().message());
    return out;
  }
  out.ok = true;
  out.server = *timings;
  return out;
}

class HttpTransport final : public Transport {
 public:
  HttpTransport(std::unique_ptr<AsyncHttpClient> client,
                std::vector<std::shared_ptr<const std::string>> payloads)
      : client_(std::move(client)), payloads_(std::move(payloads)) {}
  ~HttpTransport() override { Shutdown(); }

  size_t num_payloads() const override { return payloads_.size(); }

  void Start(size_t index, CallCallback done) override {
    client_->Send(payloads_[index % payloads_.size()],
                  [done = std::move(done)](AsyncHttpResult r) { done(ToCallResult(std::move(r))); });
  }

  void Shutdown() override { client_->Shutdown(); }

  int64_t connections_opened() const override { return client_->connections_opened(); }

 private:
  std::unique_ptr<AsyncHttpClient> client_;
  const std::vector<std::shared_ptr<const std::string>> payloads_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> CreateHttpTransport(
    const HttpTransportOptions& options, const Target& target,
    const std::vector<std::vector<Tensor>>& rows) {
  if (target.model.empty() == target.app.empty()) {
    return absl::InvalidArgumentError("name exactly one of a model and an app");
  }
  if (rows.empty()) return absl::InvalidArgumentError("no input rows to send");
  const std::string path =
      target.app.empty()
          ? absl::StrCat(options.path_prefix, "/v2/models/", http::PercentEncode(target.model),
                         "/infer")
          : absl::StrCat(options.path_prefix, "/v2/apps/", http::PercentEncode(target.app),
                         "/infer");
  RequestParameters parameters;
  parameters.latency_ms = target.latency_ms;
  parameters.min_accuracy = target.min_accuracy;
  parameters.max_cost = target.max_cost;
  parameters.binary_data_output = options.binary;

  std::vector<std::shared_ptr<const std::string>> payloads;
  payloads.reserve(rows.size());
  for (const std::vector<Tensor>& row : rows) {
    std::string wire;
    std::vector<http::Header> headers;
    if (!target.api_key.empty()) {
      headers.push_back({"Authorization", BearerValue(target.api_key)});
    }
    if (options.binary) {
      MAITRE_ASSIGN_OR_RETURN(BinaryRequest body, EncodeBinaryRequest(row, parameters));
      headers.push_back({"Content-Type", "application/octet-stream"});
      headers.push_back({"Inference-Header-Content-Length", absl::StrCat(body.json_length)});
      wire = SerializeHttpRequest("POST", options.address, path, headers, body.body);
    } else {
      MAITRE_ASSIGN_OR_RETURN(std::string body, EncodeJsonRequest(row, parameters));
      headers.push_back({"Content-Type", "application/json"});
      wire = SerializeHttpRequest("POST", options.address, path, headers, body);
    }
    payloads.push_back(std::make_shared<const std::string>(std::move(wire)));
  }

  AsyncHttpClientOptions client_options;
  client_options.address = options.address;
  client_options.io_threads = options.io_threads;
  client_options.max_connections = options.max_connections;
  client_options.timeout = options.timeout;
  client_options.clock = options.clock;
  MAITRE_ASSIGN_OR_RETURN(auto client, AsyncHttpClient::Create(std::move(client_options)));
  return std::unique_ptr<Transport>(new HttpTransport(std::move(client), std::move(payloads)));
}

absl::string_view ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kHttpJson:
      return "http";
    case Protocol::kHttpBinary:
      return "http-binary";
    case Protocol::kGrpc:
      return "grpc";
  }
  return "unknown";
}

absl::StatusOr<Protocol> ParseProtocol(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "http" || lower == "http-json") return Protocol::kHttpJson;
  if (lower == "http-binary") return Protocol::kHttpBinary;
  if (lower == "grpc") return Protocol::kGrpc;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown protocol \"", name, "\" (use http, http-binary or grpc)"));
}

}  // namespace maitre::loadgen
