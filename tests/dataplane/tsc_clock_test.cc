// tests/dataplane/tsc_clock_test.cc — the DPDK workers' TSC-to-wall-clock calibration (pure;
// the TSC values are made up, no EAL).
#include "dataplane/dpdk/tsc_clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace flurry::dataplane::dpdk {
namespace {

TEST(TscCalibration, ConvertsTicksToWallTime) {
  const std::uint64_t hz = 2'400'000'000;
  const auto c = TscCalibration::make(1'000'000, 1'700'000'000'000'000'000, hz);
  EXPECT_EQ(c.unix_ms(1'000'000), 1'700'000'000'000u);
  EXPECT_EQ(c.unix_ms(1'000'000 + hz), 1'700'000'001'000u);           // one second later
  EXPECT_EQ(c.unix_ms(1'000'000 + hz / 1000 * 5), 1'700'000'000'005u);  // 5 ms later
  EXPECT_EQ(c.unix_ms(0), 1'700'000'000'000u);  // before the base reads as the base
}

TEST(TscCalibration, FastAndSlowPathsAgree) {
  for (const std::uint64_t hz : {1'000'000ull, 1'000'000'000ull, 2'900'000'123ull, 5'000'000'000ull}) {
    const auto c = TscCalibration::make(0, 0, hz);
    for (const std::uint64_t seconds : {1ull, 60ull, 3600ull, 86400ull * 30}) {
      const std::int64_t ns = c.unix_ns(hz * seconds);
      const auto expected = static_cast<std::int64_t>(seconds * 1'000'000'000);
      EXPECT_NEAR(static_cast<double>(ns), static_cast<double>(expected), expected * 1e-6)
          << hz << " Hz, " << seconds << " s";
    }
  }
}

TEST(TscClockSync, ReaderSeesWholeCalibrationsOnly) {
  TscClockSync sync;
  TscCalibration out;
  EXPECT_FALSE(sync.try_read(&out));  // nothing published yet
  sync.publish(TscCalibration::make(1, 3, 1001));
  ASSERT_TRUE(sync.try_read(&out));
  EXPECT_EQ(out.tsc_base, 1u);

  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::uint64_t i = 1; i <= 20'000; ++i) {
      sync.publish(TscCalibration::make(i, static_cast<std::int64_t>(i) * 3, 1000 + i));
      if (i % 64 == 0) std::this_thread::yield();  // let the reader in on a busy machine
    }
    done = true;
  });
  std::uint64_t reads = 0;
  while (!done) {
    if (sync.try_read(&out)) {
      ++reads;
      ASSERT_EQ(out.unix_ns_base, static_cast<std::int64_t>(out.tsc_base) * 3);
      ASSERT_EQ(out.tsc_hz, 1000 + out.tsc_base);
    }
  }
  writer.join();
  ASSERT_TRUE(sync.try_read(&out));
  EXPECT_EQ(out.tsc_base, 20'000u);
}

}  // namespace
}  // namespace flurry::dataplane::dpdk
