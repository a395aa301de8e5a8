// tests/support/ports.h — a loopback port for a server a test starts: picked at random outside
// the kernel's ephemeral range (where no port-0 bind or unbound client socket lands), bound
// on 127.0.0.1 to check it is free and released, so another process can take it before the
// server binds it only by picking the same port; and never one this process was handed before
// (of either type), so the servers of one test never meet on a port. Throws std::system_error
// when no free port is found.
#pragma once

#include <cstdint>
#include <utility>

namespace flurry::testing {

std::uint16_t free_udp_port();
std::uint16_t free_tcp_port();

// The ports free_udp_port and free_tcp_port pick from, for an ephemeral range of low..high:
// the larger of 10000..low-1 and high+1..65535. Throws std::runtime_error, saying how to widen
// the room, when that leaves fewer than 1000 ports.
std::pair<int, int> pick_range(int low, int high);

// Whether `port` on 127.0.0.1 can be bound with this socket type (SOCK_DGRAM, SOCK_STREAM) now.
bool bindable(int type, std::uint16_t port);

}  // namespace flurry::testing
