// tests/support/http_get.h — GET a path from a server a test started on 127.0.0.1 (a metrics
// endpoint, an HTTP door, etcd's /metrics): HTTP/1.0, so the server closes after its answer;
// bounded, 5 s at most.
#pragma once

#include <cstdint>
#include <string>

namespace flurry::testing {

// The answer's body; "" when no connection, no answer or no end of the header within 5 s.
std::string http_get_body(std::uint16_t port, const std::string& path);

}  // namespace flurry::testing
