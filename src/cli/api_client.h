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

// The API key commands send (docs/operations.md, "API keys"):
// $MAITRE_API_KEY, else the key in the file $MAITRE_API_KEY_FILE names
// (mode 0600, as the server's <data-dir>/admin-key), else "" (none).
absl::StatusOr<std::string> ApiKeyFromEnvironment();

class ApiClient {
 public:
  static absl::StatusOr<ApiClient> Connect(const std::string& server_url);

  absl::StatusOr<nlohmann::json> Get(const std::string& path);
  absl::StatusOr<nlohmann::json> Post(const std::string& path, std::string body,
                                      const std::string& content_type = "application/json");
  absl::StatusOr<nlohmann::json> Delete(const std::string& path);
  // The raw response, for callers that print bodies as they are.
  absl::StatusOr<http::Response> Send(const std::string& method, const std::string& path,
                                       std::string body, const std::string& content_type);

 private:
  ApiClient(std::unique_ptr<http::Client> client, std::string api_key)
      : client_(std::move(client)), api_key_(std::move(api_key)) {}
  std::shared_ptr<http::Client> client_;
  std::string api_key_;
};

}  // namespace maitre::cli
