#include "controller/access/http_access.h"

#include "controller/frontend/status_http.h"

namespace maitre::controller {

http::Response AccessRefusal(const absl::Status& status) {
  http::Response response = http::Response::Error(HttpStatusFor(status), status.message());
  if (absl::IsUnauthenticated(status)) {
    response.headers.push_back({"WWW-Authenticate", "Bearer realm=\"maitre\""});
  }
  return response;
}

absl::StatusOr<Principal> HttpAccess::Caller(const http::Request& request) const {
  return keys_->Authenticate(request.GetHeader("Authorization"));
}

absl::Status HttpAccess::Admit(Reach reach, const http::PathParams& params,
                               const Principal& caller) const {
  switch (reach) {
    case Reach::kPublic:
    case Reach::kAnyKey:
      return absl::OkStatus();
    case Reach::kAdmin:
      return CheckAdminAccess(caller, "this route");
    case Reach::kApp:
      return CheckAppAccess(caller, params.find("app")->second);
    case Reach::kModel: {
      std::optional<std::string> owner = model_owner_(params);
      return owner ? CheckAppAccess(caller, *owner) : absl::OkStatus();
    }
  }
  return absl::InternalError("unknown route reach");
}

http::Handler HttpAccess::Guard(Reach reach, GuardedHandler handler) const {
  return [this, reach, handler = std::move(handler)](http::Request&& request,
                                                     const http::PathParams& params,
                                                     http::Responder respond) {
    if (reach == Reach::kPublic) {
      handler(std::move(request), params, Principal{}, std::move(respond));
      return;
    }
    absl::StatusOr<Principal> caller = Caller(request);
    if (caller.ok()) {
      if (absl::Status admitted = Admit(reach, params, *caller); !admitted.ok()) {
        caller = admitted;
      }
    }
    if (!caller.ok()) {
      std::move(respond)(AccessRefusal(caller.status()));
      return;
    }
    handler(std::move(request), params, *caller, std::move(respond));
  };
}

}  // namespace maitre::controller
