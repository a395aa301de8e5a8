// tests/dataplane/door_test.cc — the front doors' policy (base/door.h), with a hand-driven
// clock: a peer at its limit loses its own longest-waiting connection (never another peer's),
// a full door sheds the connection that waited longest (never the newcomer), idle and
// incomplete-request timeouts, and the counts.
#include "base/door.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace flurry {
namespace {

DoorLimits limits(std::uint32_t total, std::uint32_t per_peer) {
  return DoorLimits{total, per_peer, 60'000, 10'000};
}

TEST(Door, APeerAtItsLimitLosesItsOwnLongestWaitingConnectionNeverAnothers) {
  Door door(limits(10, 2));
  EXPECT_FALSE(door.admit(1, 7, 100));
  EXPECT_FALSE(door.admit(2, 7, 200));
  EXPECT_FALSE(door.admit(3, 8, 50));  // another peer, waiting longest of all
  const std::optional<std::uint64_t> shed = door.admit(4, 7, 300);
  ASSERT_TRUE(shed.has_value());
  EXPECT_EQ(*shed, 1U) << "peer 7's own oldest, not peer 8's";
  door.remove(1);
  EXPECT_EQ(door.count(DoorEvent::shed_peer), 1U);
  EXPECT_EQ(door.count(DoorEvent::shed), 0U);
  EXPECT_EQ(door.open(), 3U);
  door.remove(2);
  EXPECT_FALSE(door.admit(5, 7, 400));  // room again for peer 7
}

TEST(Door, AFullDoorShedsTheConnectionThatWaitedLongestNeverTheNewcomer) {
  Door door(limits(3, 3));
  ASSERT_FALSE(door.admit(1, 1, 1000));
  ASSERT_FALSE(door.admit(2, 2, 2000));
  ASSERT_FALSE(door.admit(3, 3, 3000));
  door.input(1, 5000, false);  // 1 was active lately; 2 idle since 2000
  door.begun(3, 2500);         // 3's request under way since 2500 (already begun before)
  std::optional<std::uint64_t> shed = door.admit(4, 4, 6000);
  ASSERT_TRUE(shed.has_value());
  EXPECT_EQ(*shed, 2U);
  door.remove(2);
  shed = door.admit(5, 5, 6001);
  ASSERT_TRUE(shed.has_value());
  EXPECT_EQ(*shed, 3U) << "a request under way since 2500 waited longer than idle-since-5000";
  door.remove(3);
  EXPECT_EQ(door.count(DoorEvent::shed), 2U);
  EXPECT_EQ(door.open(), 3U);
}

TEST(Door, IdleAndIncompleteRequestsTimeOutButActiveOnesDoNot) {
  Door door(DoorLimits{10, 10, 5000, 2000});
  ASSERT_FALSE(door.admit(1, 1, 0));  // idle
  ASSERT_FALSE(door.admit(2, 1, 0));  // trickles an incomplete request
  ASSERT_FALSE(door.admit(3, 1, 0));  // completes a request every second
  std::vector<std::uint64_t> expired;
  for (std::uint64_t now = 100; now <= 6000; now += 100) {
    door.input(2, now, true);
    if (now % 1000 == 0) door.input(3, now, false);
    door.expired(now, &expired);
  }
  ASSERT_EQ(expired.size(), 2U);
  EXPECT_EQ(expired[0], 2U) << "the trickle: incomplete since 100, closed at 2100";
  EXPECT_EQ(expired[1], 1U) << "the idle one: at 5000";
  EXPECT_EQ(door.count(DoorEvent::request_timeout), 1U);
  EXPECT_EQ(door.count(DoorEvent::idle_timeout), 1U);
  // Named once: closing connections are not named again, nor counted towards the limits.
  expired.clear();
  door.expired(100'000, &expired);
  EXPECT_EQ(expired, std::vector<std::uint64_t>{3});
  EXPECT_EQ(door.open(), 0U);
}

}  // namespace
}  // namespace flurry
