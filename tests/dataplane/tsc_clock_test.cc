// tests/dataplane/tsc_clock_test.cc — the DPDK workers' TSC-to-wall-clock calibration (pure;
// the TSC values are made up, no EAL): conversion, the sequence lock under a concurrent
// writer (run it in the TSan build), and a worker whose calibration never arrived, which must
// answer RETRY instead of dividing by a zero TSC rate.
#include "dataplane/dpdk/tsc_clock.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>

#include "core/handler.h"
#include "proto/wire.h"

namespace flurry::dataplane::dpdk {
namespace {

TEST(TscCalibration, ConvertsTicksToWallTime) {
  const std::uint64_t hz = 2'400'000'000;
  const auto c = TscCalibration::make(1'000'000, 1'700'000'000'000'000'000, hz);
  EXPECT_EQ(c.unix_ms(1'000'000), 1'700'000'000'000u);
  EXPECT_EQ(c.unix_ms(1'000'000 + hz), 1'700'000'001'000u);             // one second later
  EXPECT_EQ(c.unix_ms(1'000'000 + hz / 1000 * 5), 1'700'000'000'005u);  // 5 ms later
  EXPECT_EQ(c.unix_ms(0), 1'700'000'000'000u);                          // before the base reads as the base
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

// Regression (issue 7): a worker's copy is the default calibration until the first publish
// reaches it; reading it divided by tsc_hz == 0 (SIGFPE) on the first burst.
TEST(TscCalibration, DefaultReadsItsBaseWithoutDividingByZero) {
  const TscCalibration never_published;
  for (const std::uint64_t tsc : {0ull, 1ull, 123'456'789ull, ~0ull}) {
    EXPECT_EQ(never_published.unix_ns(tsc), 0) << tsc;
    EXPECT_EQ(never_published.unix_ms(tsc), 0u) << tsc;
  }
}

TEST(TscCalibration, OnlyAPublishedCalibrationIsCalibrated) {
  EXPECT_FALSE(TscCalibration{}.calibrated());
  EXPECT_TRUE(TscCalibration::make(1, 2, 3).calibrated());
  EXPECT_TRUE(TscCalibration::make(1, 2, 0).calibrated());  // a rate of 0 is taken as 1
  EXPECT_EQ(issue_ceiling(TscCalibration{}, 5000), 0u);
  EXPECT_EQ(issue_ceiling(TscCalibration{}, core::ceiling_fenced), core::ceiling_fenced);
  EXPECT_EQ(issue_ceiling(TscCalibration::make(1, 2, 3), 5000), 5000u);
}

// What dataplane/dpdk/worker.cc does per burst, with the real handler: before the clock's
// first calibration every GET_IDS is answered RETRY; after it, IDs at the calibrated time.
TEST(TscClockSync, AWorkerWithoutACalibrationAnswersRetryThenIssues) {
  core::HandlerConfig config;
  config.retry_hint_us = 321;
  core::WorkerStats stats;
  core::Handler handler(config, stats);
  handler.start_above(0);
  const std::uint64_t ceiling_t = config.layout.time_from_unix_ms(1'800'000'000'000);

  proto::Request request;
  request.opcode = proto::Opcode::get_ids;
  request.count = 4;
  std::array<std::uint8_t, proto::datagram_size_max> in{};
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  const std::size_t in_size = proto::encode_request(request, in);

  TscClockSync sync;
  TscCalibration calibration;  // the worker's copy
  const auto answer = [&](std::uint64_t tsc) {
    core::Burst burst;  // as Worker::handle_burst fills it
    burst.now_t = config.layout.time_from_unix_ms(calibration.unix_ms(tsc));
    burst.ceiling_t = issue_ceiling(calibration, ceiling_t);
    const std::size_t size = handler.handle(std::span(in.data(), in_size), out, burst);
    return proto::decode_response(std::span(out.data(), size));
  };

  EXPECT_FALSE(sync.try_read(&calibration));  // the tick finds nothing published
  for (const std::uint64_t tsc : {0ull, 2'400'000'000ull, ~0ull}) {
    const auto retry = answer(tsc);
    ASSERT_EQ(retry.error, proto::ResponseError::ok);
    EXPECT_EQ(retry.header.status, proto::Status::retry) << tsc;
    EXPECT_EQ(retry.header.detail, 321u);
  }

  const std::uint64_t hz = 2'400'000'000;
  const std::int64_t unix_ns = 1'750'000'000'000'000'000;
  sync.publish(TscCalibration::make(1'000, unix_ns, hz));
  ASSERT_TRUE(sync.try_read(&calibration));  // the next tick
  const auto ok = answer(1'000 + hz);        // one second after the calibration
  ASSERT_EQ(ok.error, proto::ResponseError::ok);
  ASSERT_EQ(ok.header.status, proto::Status::ok);
  ASSERT_EQ(ok.header.range_count, 1u);
  EXPECT_EQ(config.layout.decode(ok.range(0).first).unix_ms, 1'750'000'001'000u);
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
