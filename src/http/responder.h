// Responder: the one-shot handle a handler uses to complete its request.
//
// A handler may answer inline or keep the Responder and answer later from
// any thread (a gRPC callback, a batch completion). The server's connection
// stays alive while a Responder for it exists, so a late answer to a
// connection that has died, or a server that has stopped, is dropped safely.
//
// Thread-safety: a Responder is a movable value owned by one thread at a
// time; calling it from any thread is safe. It is not copyable, so a
// request cannot be answered twice.
#pragma once

#include <functional>
#include <memory>

#include "http/message.h"

namespace maitre::http {

namespace internal {

// Where a Responder delivers: the server's connection, or a callback.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // Called exactly once per Responder, from whichever thread answers.
  // `dropped` is true when the Responder was destroyed unanswered; the
  // response is then a 500.
  virtual void Deliver(Response response, bool dropped) = 0;
};

}  // namespace internal

class Responder {
 public:
  // An empty Responder: calling or dropping it does nothing.
  Responder() = default;
  explicit Responder(std::shared_ptr<internal::ResponseSink> sink) noexcept
      : sink_(std::move(sink)) {}

  // For tests and in-process callers of Router::Route: `on_response` receives
  // the response (a 500 if the Responder is dropped unanswered), on the
  // thread that answers.
  static Responder FromCallback(std::function<void(Response)> on_response);

  Responder(Responder&& other) noexcept = default;
  // A still-pending Responder that is overwritten is dropped (answers 500).
  Responder& operator=(Responder&& other) noexcept;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;

  // Dropping an unanswered Responder answers 500, so a forgotten request
  // never leaves its client waiting forever.
  ~Responder();

  // Completes the request. Call at most once (the && makes a second call on
  // the same object a visible use-after-move).
  void operator()(Response response) &&;

  // False once answered, moved from, or default-constructed.
  explicit operator bool() const { return sink_ != nullptr; }

 private:
  void Drop() noexcept;

  std::shared_ptr<internal::ResponseSink> sink_;
};

}  // namespace maitre::http
