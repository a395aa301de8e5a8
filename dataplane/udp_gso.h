// dataplane/udp_gso.h — which answers of a burst the socket backend sends as one UDP GSO
// message (Linux UDP_SEGMENT, 4.18+): consecutive answers to the same peer with the same
// length. The kernel then walks its IP and device path once for the group and cuts the
// datagrams apart at the end (on loopback: at the receiving socket), instead of once per
// answer. A client that keeps many requests in flight on one socket (every flurry client,
// flurry-bench, a pipelining user) gets answers of one size back to back, so this is the
// kernel path's cost per answer that pipelining saves on TCP servers.
//
// Contract of group_answers(): the groups cover answers [0, n) in order, exactly once; a
// group has 1..segments_max answers, all to one peer, all of one length, and at most
// bytes_max bytes in all. Pure: no system call, no allocation (tests/dataplane).
#pragma once

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace flurry::dataplane {

struct GsoGroup {
  std::uint32_t first = 0;  // index of the group's first answer
  std::uint32_t count = 0;  // answers in the group (1: send it plainly)
  friend constexpr bool operator==(const GsoGroup&, const GsoGroup&) = default;
};

// The kernel's limits: UDP_MAX_SEGMENTS, and a UDP datagram's payload.
inline constexpr std::uint32_t gso_segments_max = 64;
inline constexpr std::size_t gso_bytes_max = 65507;

inline bool same_peer(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

// Groups answer i (sent to *peers[i], sizes[i] bytes); writes at most groups.size() groups
// (the caller makes it as large as the burst) and returns how many it wrote.
inline std::size_t group_answers(std::span<const sockaddr_in* const> peers,
                                 std::span<const std::size_t> sizes, std::span<GsoGroup> groups,
                                 std::uint32_t segments_max = gso_segments_max) {
  std::size_t written = 0;
  for (std::uint32_t i = 0; i < sizes.size() && written < groups.size();) {
    std::uint32_t count = 1;
    std::size_t bytes = sizes[i];
    while (i + count < sizes.size() && count < segments_max && sizes[i + count] == sizes[i] &&
           bytes + sizes[i] <= gso_bytes_max && same_peer(*peers[i + count], *peers[i])) {
      bytes += sizes[i];
      ++count;
    }
    groups[written++] = {i, count};
    i += count;
  }
  return written;
}

// The control block of one UDP_SEGMENT send.
inline constexpr std::size_t gso_control_size = CMSG_SPACE(sizeof(std::uint16_t));

// Makes `message` a UDP GSO send: its payload leaves as datagrams of `segment` bytes (the
// last may be shorter). `control` (gso_control_size bytes) must outlive the send.
inline void set_udp_segment(msghdr& message, std::span<std::uint8_t, gso_control_size> control,
                            std::uint16_t segment) {
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_UDP;
  header->cmsg_type = UDP_SEGMENT;
  header->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
  std::memcpy(CMSG_DATA(header), &segment, sizeof segment);
}

// UDP_GRO: the size of each datagram in a received buffer of `length` bytes, from the
// receive's control messages; `length` (one datagram) when the kernel merged nothing. Never 0
// for a nonempty buffer, so a caller stepping through the buffer by it always ends.
inline std::size_t gro_segment_size(const msghdr& message, std::size_t length) {
  if (message.msg_controllen == 0) return length;
  for (const cmsghdr* control = CMSG_FIRSTHDR(&message); control != nullptr;
       control = CMSG_NXTHDR(const_cast<msghdr*>(&message), const_cast<cmsghdr*>(control))) {
    if (control->cmsg_level != SOL_UDP || control->cmsg_type != UDP_GRO) continue;
    if (control->cmsg_len < CMSG_LEN(sizeof(int))) break;
    int segment = 0;
    std::memcpy(&segment, CMSG_DATA(control), sizeof segment);
    if (segment > 0 && static_cast<std::size_t>(segment) < length) return static_cast<std::size_t>(segment);
    break;
  }
  return length;
}

}  // namespace flurry::dataplane
