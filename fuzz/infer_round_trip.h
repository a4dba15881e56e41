// The properties the /infer codec targets (JSON, binary, gRPC) check of a
// request the server accepted: every input is a valid tensor, and the load
// generator's HTTP encoders (src/loadgen/codec.h), written from the protocol
// rather than from the server's code, send it back in a form the server's
// HTTP codec reads as the same request.
#pragma once

#include "controller/frontend/infer_codec.h"

namespace maitre::fuzz {

// Aborts (a fuzz finding) when a property fails.
void CheckAcceptedRequest(const controller::InferRequest& request);

}  // namespace maitre::fuzz
