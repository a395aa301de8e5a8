// client/errors.h — internal: filling a client::Error (client.h) and naming an errno. Not
// installed; the parts of the client share it so every message is built the same way.
#pragma once

#include <string>
#include <system_error>
#include <utility>

#include "client/client.h"

namespace flurry::client {

inline std::string errno_text(int err) { return std::system_category().message(err); }

// `error` may be null: the caller did not ask for the reason.
inline void set_error(Error* error, ErrorCode code, std::string message) {
  if (error == nullptr) return;
  error->code = code;
  error->message = std::move(message);
}

// The error every wait returns once destruction has begun.
inline bool shutting_down(Error* error) {
  set_error(error, ErrorCode::shutting_down, "the client is being destroyed");
  return false;
}

}  // namespace flurry::client
