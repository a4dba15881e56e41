// maitre_http in one include: request/response values, the router and
// Responder, the asynchronous server, the blocking client and the
// multipart/form-data codec. See src/http/README.md. Each header states its
// own thread-safety.
#pragma once

#include "http/client.h"     // IWYU pragma: export
#include "http/message.h"    // IWYU pragma: export
#include "http/multipart.h"  // IWYU pragma: export
#include "http/responder.h"  // IWYU pragma: export
#include "http/router.h"     // IWYU pragma: export
#include "http/server.h"     // IWYU pragma: export
