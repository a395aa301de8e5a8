// perf/udp_reflector.cc — the baseline for the socket backend: the same kernel UDP path
// (recvmmsg/sendmmsg, bursts of 32, one thread) with no ID engine. A GET_IDS is answered OK
// with one range of the count asked, taken from a bare counter (unique within a run, so
// flurry-bench's duplicate check holds; no clock, layout or ceiling); anything else with a
// 20-byte response header, status OK. flurry-bench drives it unchanged; flurryd's figures
// divided by these show what the engine and handler cost.
// With --echo it sends every datagram back as it came, like dpdk-testpmd's 5tswap, for
// `flurry-bench --echo` (the same client path a veth run uses against testpmd).
// With --duplicate-every N every Nth GET_IDS answer repeats the previous answer's range: a
// broken server, for the test that flurry-bench's duplicate check catches one.
//   udp-reflector --listen 127.0.0.1:7430 --duration-s 10 [--echo | --duplicate-every N]
//   (bounded: exits by itself)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>

#include "proto/wire.h"

namespace {

namespace proto = flurry::proto;

// Writes the answer to the `size`-byte datagram in `buffer` over it; returns the answer's size.
struct Ids {
  std::uint64_t next = 1;
  std::uint64_t answers = 0;
  std::uint64_t duplicate_every = 0;  // 0: never
  std::uint64_t last_first = 1;
};

std::size_t answer(std::span<std::uint8_t> buffer, std::size_t size, Ids& ids) {
  const auto request = proto::decode_request(buffer.first(size));
  proto::ResponseHeader header;
  header.opcode = request.request.opcode;
  header.request_id = request.request.request_id;
  if (request.error != proto::RequestError::ok || request.request.opcode != proto::Opcode::get_ids) {
    return proto::encode_response_header(header, buffer);
  }
  // One range (32 bytes) is within the 3x of the smallest request (60 bytes).
  static_assert(proto::response_header_size + proto::range_size <=
                proto::response_size_max(proto::request_header_size));
  header.range_count = 1;
  const std::size_t header_size = proto::encode_response_header(header, buffer);
  ++ids.answers;
  if (ids.duplicate_every != 0 && ids.answers % ids.duplicate_every == 0) {
    proto::encode_range(buffer, 0, {ids.last_first, request.request.count});  // on purpose
  } else {
    proto::encode_range(buffer, 0, {ids.next, request.request.count});
    ids.last_first = ids.next;
    ids.next += request.request.count;
  }
  return header_size + proto::range_size;
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:7430";
  double duration_s = 10;
  bool echo = false;
  Ids ids;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--echo") == 0)
      echo = true;
    else if (has_value && std::strcmp(argv[i], "--listen") == 0)
      listen = argv[++i];
    else if (has_value && std::strcmp(argv[i], "--duration-s") == 0)
      duration_s = std::stod(argv[++i]);
    else if (has_value && std::strcmp(argv[i], "--duplicate-every") == 0)
      ids.duplicate_every = std::stoull(argv[++i]);
    else {
      std::fprintf(stderr,
                   "udp-reflector: bad argument %s (--listen ADDR:PORT, --duration-s N, --echo, "
                   "--duplicate-every N)\n",
                   argv[i]);
      return 2;
    }
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos ||
      inet_pton(AF_INET, listen.substr(0, colon).c_str(), &address.sin_addr) != 1) {
    std::fprintf(stderr, "udp-reflector: --listen must be IPv4ADDR:PORT\n");
    return 2;
  }
  address.sin_port = htons(static_cast<std::uint16_t>(std::stoi(listen.substr(colon + 1))));
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  timeval timeout{0, 50'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    std::fprintf(stderr, "udp-reflector: bind %s: %s\n", listen.c_str(), std::strerror(errno));
    return 1;
  }
  constexpr unsigned burst = 32;
  std::array<std::array<std::uint8_t, 2048>, burst> buffers{};
  std::array<sockaddr_in, burst> peers{};
  std::array<iovec, burst> iov{};
  std::array<mmsghdr, burst> messages{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration_s);
  while (std::chrono::steady_clock::now() < deadline) {
    for (unsigned i = 0; i < burst; ++i) {
      iov[i] = {buffers[i].data(), buffers[i].size()};
      messages[i].msg_hdr = {};
      messages[i].msg_hdr.msg_name = &peers[i];
      messages[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
      messages[i].msg_hdr.msg_iov = &iov[i];
      messages[i].msg_hdr.msg_iovlen = 1;
    }
    const int received = recvmmsg(fd, messages.data(), burst, MSG_WAITFORONE, nullptr);
    if (received <= 0) continue;
    for (unsigned i = 0; i < static_cast<unsigned>(received); ++i) {
      // --echo: send back the bytes received, as they came.
      iov[i].iov_len = echo ? messages[i].msg_len : answer(buffers[i], messages[i].msg_len, ids);
    }
    sendmmsg(fd, messages.data(), static_cast<unsigned>(received), 0);
  }
  close(fd);
  return 0;
}
