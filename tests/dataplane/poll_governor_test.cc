// The socket worker's polling window (dataplane/poll_governor.h): it grows for gaps a short
// sleep ended, holds while polling covers the gaps, and falls to nothing for sparse traffic.
#include "dataplane/poll_governor.h"

#include <gtest/gtest.h>

namespace flurry::dataplane {
namespace {

constexpr std::uint64_t us = 1000;

TEST(PollGovernor, OffNeverPolls) {
  PollGovernor governor(0);
  for (std::uint64_t gap : {1 * us, 10 * us, 0 * us, 5000 * us}) {
    EXPECT_FALSE(governor.on_gap(gap));
    EXPECT_EQ(governor.window_ns(), 0U);
  }
}

TEST(PollGovernor, StartsWithoutPolling) { EXPECT_EQ(PollGovernor(200 * us).window_ns(), 0U); }

TEST(PollGovernor, ShortSleepsGrowTheWindowUntilItCoversTheGap) {
  PollGovernor governor(200 * us);
  // A ping-pong client coming back 70 µs after each answer.
  EXPECT_FALSE(governor.on_gap(70 * us));
  EXPECT_EQ(governor.window_ns(), 50 * us);  // a quarter of the most
  EXPECT_FALSE(governor.on_gap(70 * us));
  EXPECT_EQ(governor.window_ns(), 100 * us);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(governor.on_gap(70 * us));
  EXPECT_EQ(governor.window_ns(), 100 * us);  // covered: no more polling than needed
}

TEST(PollGovernor, NeverPollsLongerThanTheMost) {
  PollGovernor governor(200 * us);
  for (int i = 0; i < 20; ++i) governor.on_gap(199 * us);
  EXPECT_EQ(governor.window_ns(), 200 * us);
  EXPECT_TRUE(governor.on_gap(200 * us));
}

TEST(PollGovernor, SparseTrafficStopsPolling) {
  PollGovernor governor(200 * us);
  for (int i = 0; i < 3; ++i) governor.on_gap(150 * us);
  ASSERT_EQ(governor.window_ns(), 200 * us);
  // A request a millisecond: polling would never have found one.
  EXPECT_FALSE(governor.on_gap(1000 * us));
  EXPECT_EQ(governor.window_ns(), 100 * us);
  EXPECT_FALSE(governor.on_gap(1000 * us));
  EXPECT_EQ(governor.window_ns(), 50 * us);
  EXPECT_FALSE(governor.on_gap(1000 * us));
  EXPECT_EQ(governor.window_ns(), 0U);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(governor.on_gap(1000 * us));
  EXPECT_EQ(governor.window_ns(), 0U);
}

TEST(PollGovernor, ComesBackWhenTheTrafficDoes) {
  PollGovernor governor(200 * us);
  for (int i = 0; i < 5; ++i) governor.on_gap(5000 * us);
  ASSERT_EQ(governor.window_ns(), 0U);
  EXPECT_FALSE(governor.on_gap(20 * us));
  EXPECT_TRUE(governor.on_gap(20 * us));
}

TEST(PollGovernor, ATinyMostStillPolls) {
  PollGovernor governor(3);  // 3 ns: a quarter rounds to 0, the window starts at 1 ns
  EXPECT_FALSE(governor.on_gap(2));
  EXPECT_EQ(governor.window_ns(), 1U);
  EXPECT_FALSE(governor.on_gap(2));
  EXPECT_TRUE(governor.on_gap(2));
}

}  // namespace
}  // namespace flurry::dataplane
