#include "http/host_port.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace maitre::http::internal {

absl::Status SplitHostPort(absl::string_view address, absl::string_view default_port,
                           std::string* host, std::string* port) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad address \"", address, "\": ", why, " (expected host:port)"));
  };
  absl::string_view host_part;
  absl::string_view port_part;
  if (!address.empty() && address[0] == '[') {
    size_t close = address.find(']');
    if (close == absl::string_view::npos) return bad("unclosed '['");
    host_part = address.substr(1, close - 1);
    absl::string_view rest = address.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad("junk after ']'");
      port_part = rest.substr(1);
    }
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      host_part = address;
    } else {
      host_part = address.substr(0, colon);
      port_part = address.substr(colon + 1);
      if (host_part.find(':') != absl::string_view::npos) {
        return bad("an IPv6 host must be written in brackets, as [::1]:8000");
      }
    }
  }
  if (port_part.empty()) {
    if (default_port.empty()) return bad("no port");
    port_part = default_port;
  }
  uint32_t number = 0;
  if (!absl::SimpleAtoi(port_part, &number) || number > 65535 ||
      !absl::ascii_isdigit(static_cast<unsigned char>(port_part[0]))) {
    return bad(absl::StrCat("port \"", port_part, "\" is not a number in [0, 65535]"));
  }
  *host = std::string(host_part);
  *port = absl::StrCat(number);
  return absl::OkStatus();
}

}  // namespace maitre::http::internal
