// tests/persist/sequence_store_test.cc — persist::SequenceStore on real files: records survive
// a reopen (both write methods), a delete sticks and leaves its tombstone (name and floor)
// until the entry is written in use again, a damaged newer slot falls back to the
// older record (never below it: the upper bound only grows), damage to both slots refuses the
// start. Crashes at every operation are covered by tests/control/sequence_sim_test.cc.
#include "persist/sequence_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/temp_dir.h"

namespace flurry::persist {
namespace {

using testing::TempDir;

void damage(const std::string& path, std::uint64_t offset) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const std::uint8_t junk = 0x5a;
  ASSERT_EQ(::pwrite(fd, &junk, 1, static_cast<off_t>(offset + 60)), 1);
  ::close(fd);
}

class SequenceStoreTest : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Methods, SequenceStoreTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "io_uring" : "pwrite"; });

TEST_P(SequenceStoreTest, RecordsSurviveAReopenAndADeleteSticks) {
  TempDir dir("flurry-seqstore-");
  {
    auto store = SequenceStore::open(dir.path(), GetParam());
    ASSERT_TRUE(store.ok()) << store.message();
    EXPECT_FALSE((*store)->record(0));
    ASSERT_TRUE((*store)->write(0, {true, 0, "orders", 100, 10}).ok());
    ASSERT_TRUE((*store)->write(0, {true, 0, "orders", 200, 20}).ok());
    ASSERT_TRUE((*store)->write(0, {true, 0, "orders", 300, 40}).ok());
    ASSERT_TRUE((*store)->write(63, {true, 1, "ticks", 7, 5}).ok());
    ASSERT_TRUE((*store)->write(5, {true, 0, "gone", 9, 5}).ok());
    ASSERT_TRUE((*store)->write(5, {false, 0, "gone", 9, 5}).ok());
  }
  auto store = SequenceStore::open(dir.path(), GetParam());
  ASSERT_TRUE(store.ok()) << store.message();
  ASSERT_TRUE((*store)->record(0));
  EXPECT_EQ((*store)->record(0)->name, "orders");
  EXPECT_EQ((*store)->record(0)->upper, 300u);
  EXPECT_EQ((*store)->record(0)->step, 40u);
  ASSERT_TRUE((*store)->record(63));
  EXPECT_EQ((*store)->record(63)->mode, 1);
  EXPECT_EQ((*store)->record(63)->upper, 7u);
  EXPECT_FALSE((*store)->record(5)) << "a deleted entry came back";
  // The delete's tombstone: the name and its floor survive the reopen.
  ASSERT_TRUE((*store)->tombstone(5));
  EXPECT_EQ((*store)->tombstone(5)->name, "gone");
  EXPECT_EQ((*store)->tombstone(5)->upper, 9u);
  EXPECT_FALSE((*store)->tombstone(0));
  EXPECT_FALSE((*store)->tombstone(1)) << "a never-written entry is no tombstone";
  // In use again: no tombstone; freed without a name: neither.
  ASSERT_TRUE((*store)->write(5, {true, 0, "gone", 12, 5}).ok());
  EXPECT_FALSE((*store)->tombstone(5));
  ASSERT_TRUE((*store)->write(6, {false, 0, "", 0, 0}).ok());
  EXPECT_FALSE((*store)->tombstone(6));
  EXPECT_FALSE((*store)->record(6));
}

TEST_P(SequenceStoreTest, ADamagedNewerSlotFallsBackToTheOlderRecord) {
  TempDir dir("flurry-seqstore-");
  {
    auto store = SequenceStore::open(dir.path(), GetParam());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->write(2, {true, 0, "a", 100, 10}).ok());  // sequence 1: slot 1
    ASSERT_TRUE((*store)->write(2, {true, 0, "a", 200, 10}).ok());  // sequence 2: slot 0
  }
  damage(dir.path() + "/sequences", (2 * 2 + 0) * SequenceStore::slot_stride);
  auto store = SequenceStore::open(dir.path(), GetParam());
  ASSERT_TRUE(store.ok()) << store.message();
  ASSERT_TRUE((*store)->record(2));
  EXPECT_EQ((*store)->record(2)->upper, 100u);
  // The next write goes over the damaged slot, never over the surviving record.
  ASSERT_TRUE((*store)->write(2, {true, 0, "a", 300, 10}).ok());
  damage(dir.path() + "/sequences", (2 * 2 + 0) * SequenceStore::slot_stride);
  store = SequenceStore::open(dir.path(), GetParam());
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->record(2)->upper, 100u);
}

TEST_P(SequenceStoreTest, DamageToBothSlotsRefusesTheStart) {
  TempDir dir("flurry-seqstore-");
  {
    auto store = SequenceStore::open(dir.path(), GetParam());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->write(1, {true, 0, "a", 100, 10}).ok());
    ASSERT_TRUE((*store)->write(1, {true, 0, "a", 200, 10}).ok());
  }
  damage(dir.path() + "/sequences", (2 * 1 + 0) * SequenceStore::slot_stride);
  damage(dir.path() + "/sequences", (2 * 1 + 1) * SequenceStore::slot_stride);
  auto store = SequenceStore::open(dir.path(), GetParam());
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.message().find("entry 1 has no valid record"), std::string::npos) << store.message();
}

}  // namespace
}  // namespace flurry::persist
