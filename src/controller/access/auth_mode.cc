#include "controller/access/auth_mode.h"

#include <arpa/inet.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace maitre::controller {

bool IsLoopbackAddress(absl::string_view address) {
  absl::string_view host = address;
  if (absl::StartsWith(host, "[")) {
    host = host.substr(1, host.find(']') == absl::string_view::npos ? host.size() - 1
                                                                    : host.find(']') - 1);
  } else if (size_t colon = host.rfind(':');
             colon != absl::string_view::npos && host.find(':') == colon) {
    host = host.substr(0, colon);  // one colon: "host:port"; more: a bare IPv6 address
  }
  if (host == "localhost") return true;
  const std::string text(host);
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

absl::StatusOr<bool> KeysRequired(absl::string_view mode,
                                  const std::vector<std::string>& client_addresses) {
  const std::string* exposed = nullptr;
  for (const std::string& address : client_addresses) {
    if (!IsLoopbackAddress(address)) {
      exposed = &address;
      break;
    }
  }
  if (mode == "on") return true;
  if (mode == "auto") return exposed != nullptr;
  if (mode == "off") {
    if (exposed == nullptr) return false;
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth off is refused on ", *exposed,
        ", which is not a loopback address: anyone who reaches it would be the server's "
        "admin. Listen on 127.0.0.1 behind your own gateway, or use --auth auto"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--auth must be auto, on or off, not '", mode, "'"));
}

}  // namespace maitre::controller
