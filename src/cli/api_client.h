// The CLI's view of a running server: JSON over HTTP, with the server's
// {"error": ...} messages surfaced as Status messages.
//
// Thread-safety: not thread-safe (one request at a time).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "http/client.h"

namespace maitre::cli {

// Prints "maitre: <message>" on stderr and returns 1, the exit status of a
// failed command. Every client command ends an error this way, so the
// commands' files share this one.
int Fail(const absl::Status& status);

class ApiClient {
 public:
  static absl::StatusOr<ApiClient> Connect(const std::string& server_url);

  absl::StatusOr<nlohmann::json> Get(const std::string& path);
  absl::StatusOr<nlohmann::json> Post(const std::string& path, std::string body,
                                      const std::string& content_type = "application/json");
  // The raw response, for callers that print bodies as they are.
  absl::StatusOr<http::Response> Send(const std::string& method, const std::string& path,
                                       std::string body, const std::string& content_type);

 private:
  explicit ApiClient(std::unique_ptr<http::Client> client) : client_(std::move(client)) {}
  std::shared_ptr<http::Client> client_;
};

}  // namespace maitre::cli
