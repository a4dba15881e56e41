#include "http/responder.h"

#include <utility>

namespace maitre::http {
namespace {

class CallbackSink final : public internal::ResponseSink {
 public:
  explicit CallbackSink(std::function<void(Response)> on_response)
      : on_response_(std::move(on_response)) {}

  void Deliver(Response response, bool /*dropped*/) override {
    if (on_response_) on_response_(std::move(response));
  }

 private:
  std::function<void(Response)> on_response_;
};

}  // namespace

Responder Responder::FromCallback(std::function<void(Response)> on_response) {
  return Responder(std::make_shared<CallbackSink>(std::move(on_response)));
}

Responder& Responder::operator=(Responder&& other) noexcept {
  if (this != &other) {
    Drop();
    sink_ = std::move(other.sink_);
  }
  return *this;
}

Responder::~Responder() { Drop(); }

void Responder::operator()(Response response) && {
  // Clear the member first so that the Responder is spent even if Deliver
  // throws (it then behaves like any other answered Responder).
  std::shared_ptr<internal::ResponseSink> sink = std::move(sink_);
  if (sink) sink->Deliver(std::move(response), /*dropped=*/false);
}

void Responder::Drop() noexcept {
  std::shared_ptr<internal::ResponseSink> sink = std::move(sink_);
  if (!sink) return;
  try {
    sink->Deliver(Response::Error(500,
                                  "internal error: the request's handler finished "
                                  "without sending a response"),
                  /*dropped=*/true);
  } catch (...) {
    // Nothing sensible to do in a destructor; the connection's own timeout
    // or shutdown still releases the client.
  }
}

}  // namespace maitre::http
