// Internal to Maitre's two HTTP clients, the blocking http::Client and the
// load generator's AsyncHttpClient: turns a response Beast has read into an
// http::Response, so that both hand their callers the same value. It brings
// Beast's headers with it, so only a .cc file that already uses Beast may
// include it; the public headers of maitre_http stay free of Beast.
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <utility>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/message.h"

namespace maitre::http::internal {

// Every header goes to `headers` except Content-Type, which goes to
// `content_type` (left empty when the answer has none); the body is moved.
inline Response FromBeastResponse(
    boost::beast::http::response<boost::beast::http::string_body>&& message) {
  Response response;
  response.status = static_cast<int>(message.result_int());
  response.content_type.clear();
  for (const auto& field : message) {
    if (field.name() == boost::beast::http::field::content_type) {
      response.content_type.assign(field.value().data(), field.value().size());
    } else {
      response.headers.push_back(
          {std::string(field.name_string().data(), field.name_string().size()),
           std::string(field.value().data(), field.value().size())});
    }
  }
  response.body = std::move(message.body());
  return response;
}

}  // namespace maitre::http::internal
