// tests/dataplane/udp_gso_test.cc — dataplane/udp_gso.h: which answers go out as one GSO send.
#include "dataplane/udp_gso.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace flurry::dataplane
