// dataplane/dpdk/tsc_clock.h — wall time from the TSC for the DPDK workers.
//
// Workers read the TSC once per burst and turn it into Unix milliseconds with a calibration
// (TSC base, wall-clock base, TSC rate) that EAL's interrupt thread (eal-intr-thread) re-syncs against
// CLOCK_REALTIME about once a second (DpdkBackend's EAL alarm). The calibration travels
// through a sequence lock: the single writer never waits; a worker copies it on its tick
// (never per packet) and keeps its old copy when it catches a write in progress, so it
// never spins. A re-sync may move the reading back by the drift of one interval; the
// generator never lets last_t decrease, so that is harmless. Pure C++: the TSC value is
// passed in, so tests drive it with any numbers.
//
// Until a worker holds a published calibration its copy is the default one, which is not
// calibrated(): it reads as its base (no division by its zero rate), and the worker issues
// under issue_ceiling() = nothing, so every GET_IDS is answered RETRY, never an ID stamped
// with a made-up time.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/ceiling.h"

namespace flurry::dataplane::dpdk {

struct TscCalibration {
  std::uint64_t tsc_base = 0;
  std::int64_t unix_ns_base = 0;     // wall clock at tsc_base (offset for tests included)
  std::uint64_t ns_per_tsc_q32 = 0;  // nanoseconds per TSC tick, fixed point, 32 fraction bits
  std::uint64_t tsc_hz = 0;

  // Up to this many ticks past the base, delta * ns_per_tsc_q32 fits 64 bits (fast path).
  std::uint64_t fast_delta_max = 0;

  static constexpr unsigned fraction_bits = 32;
  static constexpr std::uint64_t half = std::uint64_t{1} << (fraction_bits - 1);

  // False for the default calibration (nothing published yet); make() is always calibrated.
  bool calibrated() const { return tsc_hz != 0; }

  static TscCalibration make(std::uint64_t tsc, std::int64_t unix_ns, std::uint64_t tsc_hz) {
    TscCalibration c;
    c.tsc_base = tsc;
    c.unix_ns_base = unix_ns;
    c.tsc_hz = tsc_hz == 0 ? 1 : tsc_hz;
    // Rounded to nearest; 1e9 << 32 fits 64 bits.
    c.ns_per_tsc_q32 = ((std::uint64_t{1'000'000'000} << fraction_bits) + c.tsc_hz / 2) / c.tsc_hz;
    c.fast_delta_max =
        c.ns_per_tsc_q32 == 0 ? ~std::uint64_t{0} : (~std::uint64_t{0} - half) / c.ns_per_tsc_q32;
    return c;
  }

  // Unix nanoseconds at `tsc` (a TSC before the base reads as the base; so does any TSC
  // when not calibrated()).
  std::int64_t unix_ns(std::uint64_t tsc) const {
    const std::uint64_t delta = tsc > tsc_base ? tsc - tsc_base : 0;
    std::uint64_t ns = 0;
    if (delta < fast_delta_max) {
      ns = (delta * ns_per_tsc_q32 + half) >> fraction_bits;
    } else if (tsc_hz != 0) {  // uncalibrated: fast_delta_max is 0, so every read lands here
      ns = delta / tsc_hz * 1'000'000'000 + (delta % tsc_hz) * 1'000'000'000 / tsc_hz;
    }
    return unix_ns_base + static_cast<std::int64_t>(ns);
  }
  std::uint64_t unix_ms(std::uint64_t tsc) const {
    const std::int64_t ns = unix_ns(tsc);
    return ns <= 0 ? 0 : static_cast<std::uint64_t>(ns / 1'000'000);
  }
};

// The ceiling a worker issues under in a burst: the published one once its clock is
// calibrated; before that nothing (0: the handler answers RETRY), unless fenced (FENCED says
// more, and issues nothing either).
inline std::uint64_t issue_ceiling(const TscCalibration& clock, std::uint64_t ceiling_t) {
  return clock.calibrated() || core::is_fenced(ceiling_t) ? ceiling_t : 0;
}

// Single writer (EAL's interrupt thread, in DpdkBackend's alarm; the first publish is on flurryd's main
// thread before the workers launch), many readers (workers, on their tick).
//
// The sequence lock without fences (Boehm, "Can seqlocks get along with programming language
// memory models?", 2012): every field is an atomic, written with release and read with
// acquire, so ThreadSanitizer sees every ordering it relies on (it does not model
// atomic_thread_fence). On x86 these are plain moves, as the fenced version was.
//   writer: sequence = s + 1 (odd: writing); fields (release); sequence = s + 2 (release).
//   reader: before = sequence (acquire); fields (acquire); after = sequence.
// A reader that loads any field of a later write synchronizes with that write's release
// store, so the odd sequence stored before it is visible: `after` differs from `before` and
// the copy is thrown away. If `after` equals `before` (even), every field came from the
// write that `before` completed.
class alignas(64) TscClockSync {
 public:
  void publish(const TscCalibration& c) {
    const std::uint64_t s = sequence_.load(std::memory_order_relaxed);
    sequence_.store(s + 1, std::memory_order_relaxed);
    tsc_base_.store(c.tsc_base, std::memory_order_release);
    unix_ns_base_.store(c.unix_ns_base, std::memory_order_release);
    tsc_hz_.store(c.tsc_hz, std::memory_order_release);
    sequence_.store(s + 2, std::memory_order_release);
  }

  // Copies the calibration into *out (derived fields recomputed); false (and *out untouched)
  // when a write was in progress or nothing was published yet. Never waits.
  bool try_read(TscCalibration* out) const {
    const std::uint64_t before = sequence_.load(std::memory_order_acquire);
    if (before == 0 || (before & 1) != 0) return false;
    TscCalibration c;
    c.tsc_base = tsc_base_.load(std::memory_order_acquire);
    c.unix_ns_base = unix_ns_base_.load(std::memory_order_acquire);
    c.tsc_hz = tsc_hz_.load(std::memory_order_acquire);
    if (sequence_.load(std::memory_order_relaxed) != before) return false;
    *out = TscCalibration::make(c.tsc_base, c.unix_ns_base, c.tsc_hz);
    return true;
  }

  std::uint64_t sequence() const { return sequence_.load(std::memory_order_acquire); }

 private:
  std::atomic<std::uint64_t> sequence_{0};
  std::atomic<std::uint64_t> tsc_base_{0};
  std::atomic<std::int64_t> unix_ns_base_{0};
  std::atomic<std::uint64_t> tsc_hz_{1};
};

}  // namespace flurry::dataplane::dpdk
