#include "controller/access/key_routes.h"

#include <nlohmann/json.hpp>

#include "controller/frontend/status_http.h"

namespace maitre::controller {
namespace {

using nlohmann::json;

json KeyJson(const registry::ApiKeyRecord& k) {
  json j{{"id", k.id},
         {"scope", k.admin ? "admin" : "app"},
         {"name", k.name},
         {"created_unix_ms", k.created_unix_ms}};
  if (!k.admin) j["app"] = k.app;
  return j;
}

// {"app"?: NAME, "name"?: TEXT}; an empty body makes an admin key.
absl::Status ParseKeyRequest(const std::string& body, std::string* app, std::string* name) {
  if (body.empty()) return absl::OkStatus();
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        "a key request is a JSON object: {\"app\"?: NAME (omit for an admin key), "
        "\"name\"?: what the key is for}");
  }
  for (const auto& [field, value] : j.items()) {
    if (field != "app" && field != "name") {
      return absl::InvalidArgumentError(
          "unknown field '" + field + "' in a key request; it takes \"app\" and \"name\"");
    }
    if (!value.is_string()) {
      return absl::InvalidArgumentError("\"" + field + "\" must be a string");
    }
  }
  *app = j.value("app", "");
  *name = j.value("name", "");
  if (name->size() > 200) return absl::InvalidArgumentError("a key's name is 200 bytes at most");
  return absl::OkStatus();
}

}  // namespace

void AddKeyRoutes(http::Router& router, KeyRing* keys, const HttpAccess& access) {
  using http::PathParams;
  using http::Request;
  using http::Responder;
  router.Add("POST", "/v2/keys",
             access.Guard(Reach::kAnyKey, [keys](Request&& q, const PathParams&,
                                                 const Principal& caller, Responder respond) {
               std::string app, name;
               if (absl::Status parsed = ParseKeyRequest(q.body, &app, &name); !parsed.ok()) {
                 std::move(respond)(ErrorResponse(parsed));
                 return;
               }
               auto made = keys->Create(caller, app, name);
               if (!made.ok()) {
                 std::move(respond)(ErrorResponse(made.status()));
                 return;
               }
               json j = KeyJson(made->record);
               j["key"] = made->key;
               std::move(respond)(http::Response::Json(201, j.dump()));
             }));
  router.Add("GET", "/v2/keys",
             access.Guard(Reach::kAnyKey, [keys](Request&&, const PathParams&,
                                                 const Principal& caller, Responder respond) {
               json list = json::array();
               for (const auto& k : keys->List(caller)) list.push_back(KeyJson(k));
               std::move(respond)(http::Response::Json(200, json{{"keys", list}}.dump()));
             }));
  router.Add("DELETE", "/v2/keys/{id}",
             access.Guard(Reach::kAnyKey, [keys](Request&&, const PathParams& p,
                                                 const Principal& caller, Responder respond) {
               const std::string& id = p.find("id")->second;
               absl::Status revoked = keys->Revoke(caller, id);
               if (!revoked.ok()) {
                 // The last admin key: a conflict with the server's state.
                 int code = absl::IsFailedPrecondition(revoked) ? 409 : HttpStatusFor(revoked);
                 std::move(respond)(http::Response::Error(code, revoked.message()));
                 return;
               }
               std::move(respond)(http::Response::Json(200, json{{"revoked", id}}.dump()));
             }));
}

}  // namespace maitre::controller
