// tests/client/id_ring_test.cc — client/id_ring.h, the prefetch buffer: every index claimed
// once, an overwritten slot refused rather than read twice, and no ID handed out twice under
// concurrent consumers (the TSan tree runs this too).
#include "client/id_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace flurry::client {
namespace {

TEST(IdRing, HandsOutPublishedIdsInOrderAndNothingUnpublished) {
  IdRing ring(5);
  EXPECT_EQ(ring.capacity(), 8U);  // a power of two
  for (std::uint64_t id = 100; id < 106; ++id) ASSERT_TRUE(ring.push(id));
  EXPECT_EQ(ring.buffered(), 0U);  // pushed, not published
  EXPECT_FALSE(ring.published(0));
  ring.publish();
  EXPECT_EQ(ring.buffered(), 6U);
  for (std::uint64_t expect = 100; expect < 106; ++expect) {
    const std::uint64_t index = ring.claim();
    ASSERT_TRUE(ring.published(index));
    std::uint64_t id = 0;
    ASSERT_TRUE(ring.read(index, &id));
    EXPECT_EQ(id, expect);
  }
  EXPECT_EQ(ring.buffered(), 0U);
  const std::uint64_t beyond = ring.claim();  // claimed before it exists: the next push is its
  EXPECT_FALSE(ring.published(beyond));
  ASSERT_TRUE(ring.push(7));
  ring.publish();
  std::uint64_t id = 0;
  ASSERT_TRUE(ring.read(beyond, &id));
  EXPECT_EQ(id, 7U);
}

TEST(IdRing, NeverOverwritesAnUnclaimedIdAndRefusesAnOverwrittenSlot) {
  IdRing ring(4);
  for (std::uint64_t id = 0; id < 4; ++id) ASSERT_TRUE(ring.push(id));
  EXPECT_FALSE(ring.push(4));  // would overwrite index 0, not yet claimed: dropped
  ring.publish();
  const std::uint64_t slow = ring.claim();  // index 0, claimed; its reader falls asleep
  ASSERT_TRUE(ring.push(40));               // index 4 reuses index 0's slot
  ring.publish();
  std::uint64_t id = 0;
  EXPECT_FALSE(ring.read(slow, &id));  // skipped, not read as 40 (index 4 is someone else's)
  for (std::uint64_t expect : {1, 2, 3, 40}) {
    const std::uint64_t index = ring.claim();
    ASSERT_TRUE(ring.read(index, &id));
    EXPECT_EQ(id, expect);
  }
}

TEST(IdRing, ConcurrentConsumersNeverGetAnIdTwice) {
  IdRing ring(64);  // small: the producer laps slow consumers often
  constexpr int consumers = 4;
  constexpr std::uint64_t total = 200'000;
  std::atomic<bool> done{false};
  std::vector<std::vector<std::uint64_t>> got(consumers);
  std::vector<std::thread> threads;
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      while (!done.load()) {
        const std::uint64_t index = ring.claim();
        while (!ring.published(index) && !done.load()) std::this_thread::yield();
        std::uint64_t id = 0;
        if (ring.published(index) && ring.read(index, &id)) got[c].push_back(id);
      }
    });
  }
  std::mutex io;  // the producer's lock, as the client's io_mutex
  std::uint64_t next = 0;
  while (next < total) {
    std::lock_guard lock(io);
    for (int k = 0; k < 16 && next < total; ++k) {
      if (!ring.push(next)) break;  // full: wait for claims
      ++next;
    }
    ring.publish();
  }
  // Let the consumers drain what is published, then stop them.
  while (ring.buffered() > 0) std::this_thread::yield();
  done.store(true);
  for (auto& t : threads) t.join();
  std::vector<std::uint64_t> all;
  for (const auto& ids : got) all.insert(all.end(), ids.begin(), ids.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "an ID was handed out twice";
  EXPECT_LE(all.size(), total);
  EXPECT_GT(all.size(), total / 2);  // skips are rare: a consumer must sleep through a whole lap
  EXPECT_TRUE(std::all_of(all.begin(), all.end(), [](std::uint64_t id) { return id < total; }));
}

}  // namespace
}  // namespace flurry::client
