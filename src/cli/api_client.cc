#include "cli/api_client.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "core/secret_token.h"

namespace maitre::cli {

int Fail(const absl::Status& status) {
  std::cerr << "maitre: " << status.message() << "\n";
  return 1;
}

absl::StatusOr<std::string> ApiKeyFromEnvironment() {
  if (const char* key = std::getenv("MAITRE_API_KEY"); key != nullptr && *key != '\0') {
    return std::string(key);
  }
  if (const char* file = std::getenv("MAITRE_API_KEY_FILE"); file != nullptr && *file != '\0') {
    return ReadTokenFile(file);
  }
  return std::string();
}

absl::StatusOr<ApiClient> ApiClient::Connect(const std::string& server_url) {
  auto api_key = ApiKeyFromEnvironment();
  if (!api_key.ok()) return api_key.status();
  http::ClientOptions options;
  options.base_url = server_url;
  options.timeout = 600 * kSecond;  // registration validates on a worker
  auto client = http::Client::Create(options);
  if (!client.ok()) return client.status();
  return ApiClient(*std::move(client), *std::move(api_key));
}

absl::StatusOr<http::Response> ApiClient::Send(const std::string& method, const std::string& path,
                                               std::string body,
                                               const std::string& content_type) {
  std::vector<http::Header> headers;
  if (!content_type.empty()) headers.push_back({"Content-Type", content_type});
  if (!api_key_.empty()) headers.push_back({"Authorization", BearerValue(api_key_)});
  auto response = client_->Send(method, path, std::move(body), std::move(headers));
  if (!response.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot reach the server: ",
                                               response.status().message(),
                                               " (is `maitre serve` running? see --server)"));
  }
  return response;
}

namespace {

absl::StatusOr<nlohmann::json> Decode(const http::Response& response) {
  nlohmann::json j = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (response.status >= 400) {
    std::string message = j.is_object() && j.contains("error") && j["error"].is_string()
                               ? j["error"].get<std::string>()
                               : response.body;
    return absl::Status(response.status == 404   ? absl::StatusCode::kNotFound
                        : response.status == 400 ? absl::StatusCode::kInvalidArgument
                        : response.status == 401 ? absl::StatusCode::kUnauthenticated
                        : response.status == 403 ? absl::StatusCode::kPermissionDenied
                                                 : absl::StatusCode::kUnknown,
                        absl::StrCat("HTTP ", response.status, ": ", message));
  }
  if (j.is_discarded()) return absl::InternalError("the server answered with invalid JSON");
  return j;
}

}  // namespace

absl::StatusOr<nlohmann::json> ApiClient::Get(const std::string& path) {
  auto response = Send("GET", path, "", "");
  if (!response.ok()) return response.status();
  return Decode(*response);
}

absl::StatusOr<nlohmann::json> ApiClient::Post(const std::string& path, std::string body,
                                               const std::string& content_type) {
  auto response = Send("POST", path, std::move(body), content_type);
  if (!response.ok()) return response.status();
  return Decode(*response);
}

absl::StatusOr<nlohmann::json> ApiClient::Delete(const std::string& path) {
  auto response = Send("DELETE", path, "", "");
  if (!response.ok()) return response.status();
  return Decode(*response);
}

}  // namespace maitre::cli
