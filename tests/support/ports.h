// tests/support/ports.h — a loopback port for a server a test starts: bound on 127.0.0.1 with
// port 0, read back and released, so it was free a moment ago (good enough when the server
// starts right after; another process may take it in between), and never one this process
// was handed before (of either type), so the servers of one test never meet on a port. Throws
// std::system_error when no socket can be bound.
#pragma once

#include <cstdint>

namespace flurry::testing {

std::uint16_t free_udp_port();
std::uint16_t free_tcp_port();

}  // namespace flurry::testing
