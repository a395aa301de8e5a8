// tests/dataplane/udp_gso_test.cc — dataplane/udp_gso.h: which answers go out as one GSO send.
#include "dataplane/udp_gso.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <array>
#include <cerrno>
#include <cstring>

#include <random>
#include <vector>

namespace flurry::dataplane {
namespace {

sockaddr_in peer(std::uint32_t ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(port);
  return a;
}

std::vector<GsoGroup> group(const std::vector<const sockaddr_in*>& peers,
                            const std::vector<std::size_t>& sizes,
                            std::uint32_t segments_max = gso_segments_max) {
  std::vector<GsoGroup> groups(sizes.size());
  groups.resize(group_answers(peers, sizes, groups, segments_max));
  return groups;
}

TEST(UdpGso, GroupsRunsOfOnePeerAndOneSize) {
  const sockaddr_in a = peer(0x7f000001, 5000), b = peer(0x7f000001, 5001), a2 = peer(0x7f000002, 5000);
  const std::vector<const sockaddr_in*> peers{&a, &a, &a, &b, &b, &a, &a, &a2};
  const std::vector<std::size_t> sizes{32, 32, 32, 32, 44, 32, 32, 32};
  const std::vector<GsoGroup> expected{{0, 3}, {3, 1}, {4, 1}, {5, 2}, {7, 1}};
  EXPECT_EQ(group(peers, sizes), expected);
}

TEST(UdpGso, RespectsTheSegmentAndByteLimits) {
  const sockaddr_in a = peer(0x7f000001, 5000);
  std::vector<const sockaddr_in*> peers(150, &a);
  std::vector<std::size_t> sizes(150, 32);
  const std::vector<GsoGroup> by_segments{{0, 64}, {64, 64}, {128, 22}};
  EXPECT_EQ(group(peers, sizes), by_segments);
  std::vector<std::size_t> big(100, 1472);  // 44 x 1472 = 64,768 <= 65,507 < 45 x 1472
  std::vector<const sockaddr_in*> peers100(100, &a);
  const std::vector<GsoGroup> by_bytes{{0, 44}, {44, 44}, {88, 12}};
  EXPECT_EQ(group(peers100, big), by_bytes);
}

TEST(UdpGso, EveryAnswerInExactlyOneValidGroup) {
  std::mt19937 random(42);
  const sockaddr_in choices[3] = {peer(1, 1), peer(1, 2), peer(2, 1)};
  for (int round = 0; round < 2000; ++round) {
    const std::size_t n = random() % 257;
    std::vector<const sockaddr_in*> peers(n);
    std::vector<std::size_t> sizes(n);
    for (std::size_t i = 0; i < n; ++i) {
      peers[i] = &choices[random() % 3 == 0 ? random() % 3 : 0];
      sizes[i] = random() % 4 == 0 ? 20 + 12 * (random() % 3) : 32;
    }
    const std::uint32_t segments_max = 1 + random() % 70;
    std::uint32_t next = 0;
    for (const GsoGroup& g : group(peers, sizes, segments_max)) {
      ASSERT_EQ(g.first, next);
      ASSERT_GE(g.count, 1U);
      ASSERT_LE(g.count, segments_max);
      for (std::uint32_t i = g.first; i < g.first + g.count; ++i) {
        ASSERT_EQ(sizes[i], sizes[g.first]);
        ASSERT_TRUE(same_peer(*peers[i], *peers[g.first]));
      }
      // Maximal: the next answer could not have joined (else the grouping wastes sends).
      const std::uint32_t end = g.first + g.count;
      if (end < n && g.count < segments_max) {
        ASSERT_FALSE(sizes[end] == sizes[g.first] && same_peer(*peers[end], *peers[g.first])) << end;
      }
      next = end;
    }
    ASSERT_EQ(next, n);
  }
}

// gro_segment_size: what a receive with UDP_GRO reports, built by hand.
msghdr message_with(std::span<std::uint8_t> control, int level, int type, int segment) {
  msghdr message{};
  message.msg_control = control.data();
  message.msg_controllen = CMSG_SPACE(sizeof(int));
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = level;
  header->cmsg_type = type;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &segment, sizeof segment);
  return message;
}

TEST(GroSegmentSize, IsTheWholeBufferWithoutAGroControlMessage) {
  msghdr none{};
  EXPECT_EQ(gro_segment_size(none, 100), 100U);
  std::array<std::uint8_t, CMSG_SPACE(sizeof(int))> control{};
  EXPECT_EQ(gro_segment_size(message_with(control, SOL_SOCKET, UDP_GRO, 20), 100), 100U);   // other level
  EXPECT_EQ(gro_segment_size(message_with(control, SOL_UDP, UDP_SEGMENT, 20), 100), 100U);  // other type
  EXPECT_EQ(gro_segment_size(message_with(control, SOL_UDP, UDP_GRO, 20), 100), 20U);
  // A size that would not step through the buffer is ignored: one datagram.
  EXPECT_EQ(gro_segment_size(message_with(control, SOL_UDP, UDP_GRO, 0), 100), 100U);
  EXPECT_EQ(gro_segment_size(message_with(control, SOL_UDP, UDP_GRO, -5), 100), 100U);
  EXPECT_EQ(gro_segment_size(message_with(control, SOL_UDP, UDP_GRO, 100), 100), 100U);
  EXPECT_EQ(gro_segment_size(message_with(control, SOL_UDP, UDP_GRO, 400), 100), 100U);
}

// The kernel's side, on loopback: six datagrams sent as one GSO message (five of 32 bytes,
// the last of 10) reach a UDP_GRO socket as one 170-byte receive whose control message says
// 32, and stepping by it yields the six datagrams as sent.
TEST(GroSegmentSize, SplitsWhatTheKernelMergedOnLoopback) {
  const int receiver = socket(AF_INET, SOCK_DGRAM, 0);
  const int sender = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(receiver, 0);
  ASSERT_GE(sender, 0);
  const int one = 1;
  if (setsockopt(receiver, SOL_UDP, UDP_GRO, &one, sizeof one) != 0) {
    GTEST_SKIP() << "this kernel has no UDP_GRO";
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(receiver, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(receiver, reinterpret_cast<sockaddr*>(&address), &length), 0);
  ASSERT_EQ(connect(sender, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);

  std::array<std::uint8_t, 170> sent{};
  for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<std::uint8_t>(i / 32 + 1);
  iovec out{sent.data(), sent.size()};
  std::array<std::uint8_t, gso_control_size> out_control{};
  msghdr message{};
  message.msg_iov = &out;
  message.msg_iovlen = 1;
  set_udp_segment(message, out_control, 32);
  ASSERT_EQ(sendmsg(sender, &message, 0), static_cast<ssize_t>(sent.size())) << std::strerror(errno);

  std::array<std::uint8_t, 65536> buffer{};
  std::array<std::uint8_t, CMSG_SPACE(sizeof(int))> in_control{};
  iovec in{buffer.data(), buffer.size()};
  msghdr received{};
  received.msg_iov = &in;
  received.msg_iovlen = 1;
  received.msg_control = in_control.data();
  received.msg_controllen = in_control.size();
  const ssize_t got = recvmsg(receiver, &received, 0);
  ASSERT_EQ(got, static_cast<ssize_t>(sent.size()));
  const std::size_t step = gro_segment_size(received, static_cast<std::size_t>(got));
  EXPECT_EQ(step, 32U);
  std::vector<std::size_t> pieces;
  for (std::size_t offset = 0; offset < sent.size(); offset += step) {
    pieces.push_back(std::min(step, sent.size() - offset));
    EXPECT_EQ(buffer[offset], offset / 32 + 1);
  }
  EXPECT_EQ(pieces, (std::vector<std::size_t>{32, 32, 32, 32, 32, 10}));
  EXPECT_EQ(std::memcmp(buffer.data(), sent.data(), sent.size()), 0);
  close(sender);
  close(receiver);
}

}  // namespace
}  // namespace flurry::dataplane
