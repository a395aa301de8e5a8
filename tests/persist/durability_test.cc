// tests/persist/durability_test.cc — the real WatermarkStore and identity code driven over
// the crash-simulating Io (tests/persist/crash_sim.h), crashed before every single operation.
//
// What must hold after any crash (docs/architecture.md, the invariant):
// - every watermark store() or adopt() acknowledged is recovered: open() finds that record or
//   a later attempted one, never an older one and never nothing;
// - the watermark file is never unreadable because of a crash (it is absent, or it opens);
// - once load_or_create_instance_id() returned an id, the identity file holds that id;
// - once open() with accept_corrupt returned, the reset file opens without the override.
// Each state a crash can leave is checked: the durable state (every unsynced effect dropped),
// every effect kept, directory changes kept with unsynced data dropped, and the last unsynced
// write torn after 1, half, and all-but-one of its bytes. Both write methods are checked; the
// io_uring method through a fake ring that also cuts link chains at the submit boundary and
// runs unlinked fsyncs before writes, as a kernel may.
//
// The SystemIo tests at the end check, with seccomp making one system call fail in a child
// process, that system_io() itself really calls fsync(2) and fdatasync(2).
//
// Together these tests are what makes removing any fsync/fdatasync from persist/, or
// acknowledging before a sync completed, fail (checked by deleting each in turn).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "persist/identity.h"
#include "persist/io.h"
#include "persist/watermark_store.h"
#include "tests/persist/crash_sim.h"
#include "tests/persist/test_util.h"
#include "tests/support/log_capture.h"
#include "tests/support/status.h"

namespace flurry::persist {
namespace {

// Everything persist/ logs, for the checks of its warnings (each test starts with none).
::flurry::testing::LogCapture log_capture;

using flurry::testing::failure;
using flurry::testing::is_ok;

using testing::CrashSim;
using ::testing::HasSubstr;
using testing::TempDir;

// Raw layouts (persist/ only stores them): A is the default 41/10/12 ms layout, B another.
const Identity identity_a{7, 0xa11c'e000'0000'0001ull, {1'288'834'974'657ull, 1, 41, 10, 12, 0, 0}};
const Identity identity_b{7, 0xb0b0'0000'0000'0002ull, {1'700'000'000'000ull, 10, 38, 10, 15, 2, 0}};

struct Method {
  std::string name;
  bool io_uring = false;
  CrashSim::RingKnobs knobs;
  bool rename_unsupported = false;
};

std::vector<Method> all_methods() {
  std::vector<Method> methods;
  methods.push_back({"pwrite+fdatasync", false, {}, false});
  methods.push_back({"pwrite+fdatasync, link() instead of renameat2", false, {}, true});
  methods.push_back({"io_uring", true, {}, false});
  CrashSim::RingKnobs fsync_first;
  fsync_first.fsync_first = true;
  methods.push_back({"io_uring, fsyncs first", true, fsync_first, false});
  CrashSim::RingKnobs partial;
  partial.submit_max = 1;
  methods.push_back({"io_uring, one entry per submit", true, partial, false});
  CrashSim::RingKnobs partial_fsync_first = partial;
  partial_fsync_first.fsync_first = true;
  methods.push_back({"io_uring, one entry per submit, fsyncs first", true, partial_fsync_first, false});
  return methods;
}

// A record as the check sees it; `record == false`: the file holds no record (new or reset).
struct Written {
  bool record = false;
  std::uint32_t node_id = 0;
  std::uint64_t layout_fingerprint = 0;
  std::uint64_t watermark_t = 0;

  bool operator==(const Written&) const = default;
  std::string text() const {
    if (!record) return "no record";
    return "node " + std::to_string(node_id) + " fingerprint " + testing::hex64(layout_fingerprint) + " W " +
           std::to_string(watermark_t);
  }
};

Written written(const Identity& identity, std::uint64_t watermark_t) {
  return {true, identity.node_id, identity.layout_fingerprint, watermark_t};
}

// What one run of a scenario attempted and what it was told was durable.
struct Outcome {
  std::vector<Written> attempts;        // in order; each registered before its call
  std::optional<std::size_t> last_ack;  // index into attempts
  std::optional<std::string> instance_id;

  void attempt(const Written& w) { attempts.push_back(w); }
  void acknowledge() { last_ack = attempts.size() - 1; }
};

OpenOptions options_for(CrashSim& sim, const Method& method) {
  OpenOptions o;
  o.io = &sim;
  o.use_io_uring = method.io_uring;
  return o;
}

void store(WatermarkStore& s, const Identity& identity, std::uint64_t w, Outcome& out) {
  out.attempt(written(identity, w));
  std::string error;
  if (s.store(w).ok()) out.acknowledge();
}

using Scenario = std::function<void(CrashSim&, const std::string& root, const Method&, Outcome&)>;
using Prepare = std::function<void(const std::string& root)>;
// Returns "" when the state under `root` (a materialized crash) is acceptable.
using Check = std::function<std::string(const std::string& root, const Outcome&)>;

// --- Scenarios. ---

// mkdir -p, file creation, stores, a reopen, more stores.
void watermark_scenario(CrashSim& sim, const std::string& root, const Method& method, Outcome& out) {
  const std::string dir = root + "/a/state";
  std::string error;
  {
    auto s = testing::open_store(dir, identity_a, options_for(sim, method), &error);
    if (s == nullptr) return;
    for (const std::uint64_t w : {100, 200, 200, 300}) store(*s, identity_a, w, out);
  }
  auto s = testing::open_store(dir, identity_a, options_for(sim, method), &error);
  if (s == nullptr) return;
  for (const std::uint64_t w : {400, 500}) store(*s, identity_a, w, out);
}

// Records under A, then adopt() under B with a LOWER carried W, stores, a reopen.
void adopt_scenario(CrashSim& sim, const std::string& root, const Method& method, Outcome& out) {
  const std::string dir = root + "/a/state";
  std::string error;
  {
    auto s = testing::open_store(dir, identity_a, options_for(sim, method), &error);
    if (s == nullptr) return;
    for (const std::uint64_t w : {1000, 2000}) store(*s, identity_a, w, out);
  }
  {
    OpenOptions o = options_for(sim, method);
    o.accept_identity_change = true;
    auto s = testing::open_store(dir, identity_b, o, &error);
    if (s == nullptr) return;
    if (s->loaded() && s->loaded()->layout_fingerprint == identity_a.layout_fingerprint) {
      out.attempt(written(identity_b, 50));
      if (s->adopt(identity_b, 50).ok()) out.acknowledge();
    }
    store(*s, identity_b, 60, out);
  }
  auto s = testing::open_store(dir, identity_b, options_for(sim, method), &error);
  if (s == nullptr) return;
  store(*s, identity_b, 70, out);
}

// A file with no valid record, opened with accept_corrupt: evidence saved, file reset.
void prepare_corrupt(const std::string& root) {
  std::filesystem::create_directories(root + "/a/state");
  testing::write_whole(root + "/a/state/watermark",
                       std::vector<std::uint8_t>(testing::watermark_file_bytes, 0xA5));
}

void corrupt_scenario(CrashSim& sim, const std::string& root, const Method& method, Outcome& out) {
  OpenOptions o = options_for(sim, method);
  o.accept_corrupt = true;
  std::string error;
  out.attempt(Written{});  // the reset: no record
  auto s = testing::open_store(root + "/a/state", identity_a, o, &error);
  if (s == nullptr) return;
  out.acknowledge();
  store(*s, identity_a, 10, out);
}

void identity_scenario(CrashSim& sim, const std::string& root, const Method&, Outcome& out) {
  std::string error;
  const auto id = testing::load_identity(root + "/b/state", &error, &sim);
  if (!id) return;
  out.instance_id = id;
  const auto again = testing::load_identity(root + "/b/state", &error, &sim);
  if (again && *again != *id) out.instance_id = "changed from " + *id + " to " + *again;
}

// A copied state dir's identity replaced (cluster mode's clone detection): once
// replace_instance_id returned, the new id is what every later start reads; a crash in the
// middle leaves the old id or a fresh one, and the file is always readable.
void replace_scenario(CrashSim& sim, const std::string& root, const Method&, Outcome& out) {
  std::string error;
  const auto id = testing::load_identity(root + "/b/state", &error, &sim);
  if (!id) return;
  out.instance_id.reset();  // from here until replace returns, either id is fine
  const auto fresh = testing::replace_identity(root + "/b/state", &error, &sim);
  if (!fresh) return;
  out.instance_id = *fresh != *id ? *fresh : "the copied id " + *id + " came back";
}

// --- Checks. ---

std::string check_records(const std::string& root, const Outcome& out, const Identity& open_as,
                          bool corrupt_before) {
  CrashSim disk(root);
  OpenOptions o;
  o.io = &disk;
  o.use_io_uring = false;
  o.accept_identity_change = true;
  std::string error;
  auto s = testing::open_store(root + "/a/state", open_as, o, &error);
  if (s == nullptr) {
    // Only the corruption the test made, before anything acknowledged its repair.
    if (corrupt_before && !out.last_ack &&
        error.find("holds no valid watermark record") != std::string::npos) {
      return "";
    }
    return "the state does not open after the crash: " + error;
  }
  Written found;
  if (s->loaded()) {
    found = {true, s->loaded()->node_id, s->loaded()->layout_fingerprint, s->durable_watermark_t()};
  }
  const std::size_t first = out.last_ack ? *out.last_ack : 0;
  for (std::size_t j = first; j < out.attempts.size(); ++j) {
    if (out.attempts[j] == found) return "";
  }
  if (!out.last_ack && !found.record) return "";
  std::string why = "recovered " + found.text() + ", but ";
  why += out.last_ack ? "the last acknowledged was " + out.attempts[*out.last_ack].text()
                      : std::string("nothing was acknowledged and it was never attempted");
  return why;
}

std::string check_watermark(const std::string& root, const Outcome& out) {
  return check_records(root, out, identity_a, false);
}

std::string check_adopt(const std::string& root, const Outcome& out) {
  return check_records(root, out, identity_b, false);
}

std::string check_corrupt(const std::string& root, const Outcome& out) {
  if (out.last_ack) {
    // The reset was acknowledged: the file must now open WITHOUT the override, and the
    // evidence must be there.
    CrashSim disk(root);
    OpenOptions o;
    o.io = &disk;
    o.use_io_uring = false;
    std::string error;
    auto s = testing::open_store(root + "/a/state", identity_a, o, &error);
    if (s == nullptr) return "the reset did not survive: " + error;
    bool evidence = false;
    for (const auto& entry : std::filesystem::directory_iterator(root + "/a/state")) {
      if (entry.path().filename().string().rfind("watermark.corrupt-", 0) == 0) {
        evidence = testing::read_file(entry.path().string()) ==
                   std::vector<std::uint8_t>(testing::watermark_file_bytes, 0xA5);
      }
    }
    if (!evidence) return "the saved copy of the corrupt file did not survive intact";
  }
  return check_records(root, out, identity_a, true);
}

std::string check_identity(const std::string& root, const Outcome& out) {
  CrashSim disk(root);
  std::string error;
  const auto id = testing::load_identity(root + "/b/state", &error, &disk);
  if (!id) return "the identity file is unreadable after the crash: " + error;
  if (out.instance_id && *id != *out.instance_id) {
    return "load_or_create returned " + *out.instance_id + " before the crash, " + *id + " after";
  }
  return "";
}

// --- The driver. ---

struct CrashState {
  CrashSim::After after;
  std::size_t torn_bytes;
  std::string name;
};

std::vector<CrashState> crash_states(const CrashSim& sim) {
  std::vector<CrashState> states = {
      {CrashSim::After::drop_volatile, 0, "unsynced effects dropped"},
      {CrashSim::After::keep_everything, 0, "every effect kept"},
      {CrashSim::After::keep_entries_drop_data, 0, "directory changes kept, unsynced data dropped"},
  };
  const std::size_t n = sim.last_unsynced_write_bytes();
  for (const std::size_t k : {std::size_t{1}, n / 2, n - 1}) {
    if (n > 1 && k >= 1 && k < n) {
      states.push_back(
          {CrashSim::After::torn_last_write, k,
           "last unsynced write torn after " + std::to_string(k) + " of " + std::to_string(n) + " bytes"});
    }
  }
  return states;
}

struct Setup {
  Method method;
  Prepare prepare;
};

void run_with(CrashSim& sim, const Method& method) {
  sim.ring_knobs = method.knobs;
  sim.rename_unsupported = method.rename_unsupported;
}

// Runs `scenario` once without a crash (which must acknowledge its last attempt), then once
// per operation index k with a crash before operation k (k == count: after the last one),
// and checks every state each crash can leave. Stops at the first failure, printing the log.
void check_every_crash_point(const Scenario& scenario, const Check& check, const Method& method,
                             const Prepare& prepare = nullptr) {
  SCOPED_TRACE("method: " + method.name);
  std::size_t total = 0;
  {
    TempDir root;
    if (prepare) prepare(root.path());
    CrashSim sim(root.path());
    run_with(sim, method);
    Outcome out;
    scenario(sim, root.path(), method, out);
    total = sim.ops();
    ASSERT_FALSE(sim.crashed());
    if (!out.attempts.empty()) {
      ASSERT_TRUE(out.last_ack.has_value() && *out.last_ack + 1 == out.attempts.size())
          << "without a crash every attempt must succeed\n"
          << sim.log_text();
    }
    ASSERT_GT(total, 3u);
  }
  std::size_t states_checked = 0;
  for (std::size_t k = 0; k <= total; ++k) {
    TempDir root;
    if (prepare) prepare(root.path());
    CrashSim sim(root.path());
    run_with(sim, method);
    sim.crash_at(k);
    Outcome out;
    scenario(sim, root.path(), method, out);
    for (const auto& state : crash_states(sim)) {
      TempDir target;
      sim.materialize(target.path(), state.after, state.torn_bytes);
      const std::string problem = check(target.path(), out);
      ++states_checked;
      if (!problem.empty()) {
        ADD_FAILURE() << "crash before operation " << k << " of " << total << ", " << state.name << ": "
                      << problem << "\noperations:\n"
                      << sim.log_text();
        return;
      }
    }
  }
  ::testing::Test::RecordProperty("states_checked_" + method.name, std::to_string(states_checked));
}

std::string method_test_name(const ::testing::TestParamInfo<Method>& info) {
  std::string name;
  for (const char c : info.param.name) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) name += c;
  }
  return name;
}

class DurabilityTest : public ::testing::TestWithParam<Method> {};

INSTANTIATE_TEST_SUITE_P(Methods, DurabilityTest, ::testing::ValuesIn(all_methods()), method_test_name);

// The identity file never uses the ring: only the file creation variants.
class IdentityDurabilityTest : public ::testing::TestWithParam<Method> {};

INSTANTIATE_TEST_SUITE_P(Methods, IdentityDurabilityTest,
                         ::testing::Values(all_methods()[0], all_methods()[1]), method_test_name);

TEST_P(DurabilityTest, EveryAcknowledgedWatermarkSurvivesACrashAtEveryStep) {
  check_every_crash_point(watermark_scenario, check_watermark, GetParam());
}

TEST_P(DurabilityTest, AnAdoptedWatermarkSurvivesACrashAtEveryStep) {
  check_every_crash_point(adopt_scenario, check_adopt, GetParam());
}

TEST_P(DurabilityTest, AnAcknowledgedCorruptResetSurvivesACrashAtEveryStep) {
  check_every_crash_point(corrupt_scenario, check_corrupt, GetParam(), prepare_corrupt);
}

TEST_P(IdentityDurabilityTest, AReturnedInstanceIdSurvivesACrashAtEveryStep) {
  check_every_crash_point(identity_scenario, check_identity, GetParam());
}

TEST_P(IdentityDurabilityTest, AReplacedInstanceIdSurvivesACrashAtEveryStep) {
  check_every_crash_point(replace_scenario, check_identity, GetParam());
}

// --- The io_uring method against specific kernel behaviour (regressions). ---

class RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = root_.path() + "/state";
    log_capture.warnings();  // nothing logged before this test counts
  }

  std::unique_ptr<WatermarkStore> open_ring_store() {
    OpenOptions o;
    o.io = &sim_;
    o.use_io_uring = true;
    std::string error;
    auto s = testing::open_store(dir_, identity_a, o, &error);
    EXPECT_NE(s, nullptr) << error;
    if (s != nullptr) {
      EXPECT_EQ(s->method(), "io_uring");
    }
    return s;
  }

  // What a power loss now would leave: the recovered W.
  std::uint64_t recovered_after_power_loss(CrashSim::After after = CrashSim::After::drop_volatile) {
    TempDir target;
    sim_.materialize(target.path(), after);
    CrashSim disk(target.path());
    OpenOptions o;
    o.io = &disk;
    o.use_io_uring = false;
    std::string error;
    auto s = testing::open_store(target.path() + "/state", identity_a, o, &error);
    EXPECT_NE(s, nullptr) << error;
    return s != nullptr ? s->durable_watermark_t() : 0;
  }

  TempDir root_;
  std::string dir_;
  CrashSim sim_{root_.path()};
};

// A submit that consumes only the write cuts the link: an fsync submitted later may run
// before the write and miss it. The store must reap the write first.
TEST_F(RingTest, PartialSubmitAcknowledgesOnlyAfterAnFsyncThatFollowedTheWrite) {
  sim_.ring_knobs.submit_max = 1;
  sim_.ring_knobs.fsync_first = true;
  auto s = open_ring_store();
  ASSERT_NE(s, nullptr);
  for (const std::uint64_t w : {100, 200, 300}) {
    std::string error;
    ASSERT_TRUE(is_ok(s->store(w))) << sim_.log_text();
    ASSERT_EQ(recovered_after_power_loss(), w) << sim_.log_text();
  }
  EXPECT_EQ(s->method(), "io_uring") << "a partial submit is not a ring failure";
  EXPECT_TRUE(log_capture.warnings().empty());
}

// The same partial submit when the write fails: the fsync entry is still submitted (nothing
// is left in the queue), the store fails, and the next store works.
TEST_F(RingTest, PartialSubmitWithAFailedWriteFailsTheStoreAndLeavesNothingBehind) {
  sim_.ring_knobs.submit_max = 1;
  auto s = open_ring_store();
  ASSERT_NE(s, nullptr);
  std::string error;
  ASSERT_TRUE(is_ok(s->store(100)));
  sim_.crash_at(sim_.ops());  // every later operation fails with EIO
  error = failure(s->store(200));
  EXPECT_THAT(error, HasSubstr("write failed: Input/output error (io_uring)"));
  EXPECT_EQ(s->durable_watermark_t(), 100u);
  EXPECT_EQ(s->method(), "io_uring");
}

// A ring that fails a wait while its write is still in flight is retired. The fallback
// pwrite must not start before that write completed: otherwise it can land later, over a
// newer record in the same slot.
TEST_F(RingTest, ARetiredRingNeverLetsALateWriteLandOverANewerRecord) {
  auto s = open_ring_store();
  ASSERT_NE(s, nullptr);
  std::string error;
  ASSERT_TRUE(is_ok(s->store(100)));  // sequence 1, slot 1
  ASSERT_TRUE(is_ok(s->store(200)));  // sequence 2, slot 0
  sim_.ring_knobs.fail_waits = 1;
  ASSERT_TRUE(is_ok(s->store(300))) << sim_.log_text();  // sequence 3, slot 1
  EXPECT_EQ(s->method(), "pwrite+fdatasync");
  const auto warnings = log_capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("io_uring failed (wait: Invalid request descriptor)"));
  ASSERT_TRUE(is_ok(s->store(400)));  // slot 0
  ASSERT_TRUE(is_ok(s->store(500)));  // slot 1, where sequence 3 went
  sim_.run_ring_requests();           // whatever the kernel still held lands now
  EXPECT_EQ(recovered_after_power_loss(CrashSim::After::keep_everything), 500u) << sim_.log_text();
  EXPECT_EQ(recovered_after_power_loss(), 500u) << sim_.log_text();
}

// Requests that cannot be reaped (the device stopped answering the ring): nothing is written
// until they have completed, the store fails saying so, and recovers once they have.
TEST_F(RingTest, UnreapableRequestsBlockEveryWriteUntilTheyComplete) {
  auto s = open_ring_store();
  ASSERT_NE(s, nullptr);
  std::string error;
  ASSERT_TRUE(is_ok(s->store(100)));
  ASSERT_TRUE(is_ok(s->store(200)));
  const auto before = testing::read_file(dir_ + "/watermark");
  sim_.ring_knobs.fail_waits = 1;
  sim_.ring_knobs.stuck = true;
  for (int attempt = 0; attempt < 3; ++attempt) {
    error = failure(s->store(300));
    EXPECT_THAT(error, HasSubstr("2 io_uring request(s) handed to the kernel earlier have not "
                                 "completed within 1000 ms"));
    EXPECT_THAT(error, HasSubstr("nothing is written until they have"));
    EXPECT_THAT(error, HasSubstr("the durable watermark stays 200"));
    EXPECT_EQ(testing::read_file(dir_ + "/watermark"), before) << "nothing may be written";
  }
  EXPECT_EQ(s->method(), "pwrite+fdatasync");
  EXPECT_EQ(s->durable_watermark_t(), 200u);
  sim_.ring_knobs.stuck = false;  // the device answers again
  ASSERT_TRUE(is_ok(s->store(300))) << sim_.log_text();
  ASSERT_TRUE(is_ok(s->store(400)));
  ASSERT_TRUE(is_ok(s->store(500)));
  sim_.run_ring_requests();
  EXPECT_EQ(recovered_after_power_loss(CrashSim::After::keep_everything), 500u);
  EXPECT_EQ(recovered_after_power_loss(), 500u);
}

// Destroying a store whose ring still has requests in flight must not free what they read:
// the ring is parked instead.
TEST_F(RingTest, ARingWithRequestsInFlightIsNeverFreed) {
  {
    auto s = open_ring_store();
    ASSERT_NE(s, nullptr);
    std::string error;
    ASSERT_TRUE(is_ok(s->store(100)));
    sim_.ring_knobs.fail_waits = 1;
    sim_.ring_knobs.stuck = true;
    error = failure(s->store(200));
  }
  EXPECT_FALSE(sim_.ring_freed_with_requests_in_flight);
  EXPECT_EQ(sim_.live_rings(), 1u) << "parked, not destroyed";
}

// And a store destroyed after its requests completed frees its ring normally.
TEST_F(RingTest, ARingWithNothingInFlightIsFreed) {
  {
    auto s = open_ring_store();
    ASSERT_NE(s, nullptr);
    std::string error;
    ASSERT_TRUE(is_ok(s->store(100)));
  }
  EXPECT_FALSE(sim_.ring_freed_with_requests_in_flight);
  EXPECT_EQ(sim_.live_rings(), 0u);
}

// Every completion is checked: a failed fsync fails the store for both methods, and the next
// store succeeds.
TEST(SyncFailure, AFailedSyncIsNeverAcknowledged) {
  for (const bool io_uring : {false, true}) {
    SCOPED_TRACE(io_uring ? "io_uring" : "pwrite+fdatasync");
    TempDir root;
    CrashSim sim(root.path());
    OpenOptions o;
    o.io = &sim;
    o.use_io_uring = io_uring;
    std::string error;
    auto s = testing::open_store(root.path() + "/state", identity_a, o, &error);
    ASSERT_NE(s, nullptr) << error;
    ASSERT_TRUE(is_ok(s->store(100)));
    sim.fail_syncs = 1;
    error = failure(s->store(200));
    EXPECT_THAT(error, HasSubstr("fdatasync failed: Input/output error"));
    EXPECT_EQ(s->durable_watermark_t(), 100u);
    ASSERT_TRUE(is_ok(s->store(200)));
    EXPECT_EQ(s->method(), io_uring ? "io_uring" : "pwrite+fdatasync");
  }
}

// The fake ring's unavailability is the system's: one warning, pwrite+fdatasync.
TEST(RingUnavailable, FallsBackOnceWithOneWarning) {
  log_capture.warnings();  // nothing logged before this test counts
  TempDir root;
  CrashSim sim(root.path());
  sim.ring_knobs.unavailable = true;
  OpenOptions o;
  o.io = &sim;
  std::string error;
  auto s = testing::open_store(root.path() + "/state", identity_a, o, &error);
  ASSERT_NE(s, nullptr) << error;
  EXPECT_EQ(s->method(), "pwrite+fdatasync");
  EXPECT_THAT(log_capture.warnings(), ::testing::ElementsAre("io_uring unavailable (Function not "
                                                             "implemented); using pwrite+fdatasync"));
}

// --- The system implementation makes the system calls it names. ---
//
// The crash tests replace system_io(); these check, in child processes where a seccomp
// filter makes one system call fail with `errno_value`, that system_io() really calls it
// and that the failure reaches the caller.

// 77 when seccomp is unavailable, else installs the filter.
int fail_syscall(int syscall_nr, int errno_value) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(syscall_nr), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(errno_value) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {static_cast<unsigned short>(std::size(filter)), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 77;
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) return 77;
  return 0;
}

// Prints `what` to the child's stderr and returns 1 unless `ok`.
int expect(bool ok, const std::string& what) {
  if (ok) return 0;
  std::fprintf(stderr, "child: %s\n", what.c_str());
  return 1;
}

TEST(SystemIo, FdatasyncIsCalledForStoresAndTheCorruptReset) {
  TempDir tmp;
  prepare_corrupt(tmp.sub("corrupt"));
  const int status = testing::run_in_child([&]() -> int {
    if (fail_syscall(__NR_fdatasync, EIO) != 0) return 77;
    OpenOptions o;
    o.use_io_uring = false;
    std::string error;
    auto s = testing::open_store(tmp.sub("state"), identity_a, o, &error);
    if (s == nullptr) return expect(false, "open: " + error);
    const Status stored = s->store(1);
    if (stored.ok()) return expect(false, "store succeeded without fdatasync");
    error = stored.message();
    if (error.find("fdatasync failed: Input/output error") == std::string::npos) {
      return expect(false, "store: " + error);
    }
    o.accept_corrupt = true;
    auto reset = testing::open_store(tmp.sub("corrupt/a/state"), identity_a, o, &error);
    if (reset != nullptr) return expect(false, "the corrupt reset succeeded without fdatasync");
    return expect(error.find("cannot fdatasync state file") != std::string::npos &&
                      error.find("Input/output error") != std::string::npos,
                  "reset: " + error);
  });
  if (status == 77) GTEST_SKIP() << "seccomp unavailable here";
  EXPECT_EQ(status, 0) << "see the child's stderr above";
}

TEST(SystemIo, FsyncIsCalledWhenCreatingFilesAndDirectories) {
  TempDir tmp;
  std::filesystem::create_directory(tmp.sub("existing"));
  const int status = testing::run_in_child([&]() -> int {
    if (fail_syscall(__NR_fsync, EIO) != 0) return 77;
    std::string error;
    OpenOptions o;
    o.use_io_uring = false;
    // mkdir -p: the parent of a new directory is synced first.
    if (testing::open_store(tmp.sub("new/state"), identity_a, o, &error) != nullptr) {
      return expect(false, "open of a new directory succeeded without fsync");
    }
    if (int r = expect(error.find("cannot fsync directory " + tmp.path()) != std::string::npos,
                       "mkdir: " + error)) {
      return r;
    }
    // An existing directory: the temporary file is synced first.
    if (testing::open_store(tmp.sub("existing"), identity_a, o, &error) != nullptr) {
      return expect(false, "creating the state file succeeded without fsync");
    }
    if (int r = expect(error.find("cannot fsync " + tmp.sub("existing/watermark")) != std::string::npos,
                       "create: " + error)) {
      return r;
    }
    if (testing::load_identity(tmp.sub("existing"), &error).has_value()) {
      return expect(false, "the identity file was created without fsync");
    }
    return expect(error.find("Input/output error") != std::string::npos, "identity: " + error);
  });
  if (status == 77) GTEST_SKIP() << "seccomp unavailable here";
  EXPECT_EQ(status, 0) << "see the child's stderr above";
}

}  // namespace
}  // namespace flurry::persist
