#include "http/request_head.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace maitre::http {

void AppendRequestHead(std::string* out, absl::string_view method, absl::string_view host,
                       absl::string_view target, size_t body_size,
                       const std::vector<Header>& headers) {
  absl::StrAppend(out, method, " ", target, " HTTP/1.1\r\n");
  bool has_host = false;
  for (const Header& header : headers) has_host |= absl::EqualsIgnoreCase(header.name, "Host");
  if (!has_host) absl::StrAppend(out, "Host: ", host, "\r\n");
  absl::StrAppend(out, "Content-Length: ", body_size, "\r\n");
  for (const Header& header : headers) {
    if (absl::EqualsIgnoreCase(header.name, "Content-Length") ||
        absl::EqualsIgnoreCase(header.name, "Transfer-Encoding")) {
      continue;
    }
    absl::StrAppend(out, header.name, ": ", header.value, "\r\n");
  }
  out->append("\r\n");
}

}  // namespace maitre::http
