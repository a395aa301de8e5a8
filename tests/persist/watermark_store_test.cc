// tests/persist/watermark_store_test.cc — WatermarkStore on real files in a private /tmp
// directory, once per write method (io_uring, pwrite+fdatasync).
//
// What must hold (docs/architecture.md, the invariant): a reopen never returns a watermark below
// the last one store() acknowledged, whatever happened to the slot that was not the latest;
// a damaged latest slot falls back to the other one loudly; an unusable file or a foreign
// identity stops the start with a message that names the file and the override flag.
#include "persist/watermark_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <atomic>
#include <barrier>
#include <csignal>
#include <cstddef>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <random>
#include <thread>

#include "proto/layout.h"
#include "tests/persist/test_util.h"
#include "tests/support/log_capture.h"
#include "tests/support/status.h"

namespace flurry::persist {
namespace {

// Everything persist/ logs, for the checks of its warnings (each test starts with none).
::flurry::testing::LogCapture log_capture;

using flurry::testing::failure;
using flurry::testing::is_ok;

using ::testing::HasSubstr;
using testing::TempDir;

LayoutRecord layout_record(const proto::Layout& layout) {
  LayoutRecord out;
  out.epoch_ms = layout.epoch_ms;
  out.time_unit_ms = layout.time_unit_ms;
  out.time_bits = static_cast<std::uint8_t>(layout.time_bits);
  out.node_bits = static_cast<std::uint8_t>(layout.node_bits);
  out.sequence_bits = static_cast<std::uint8_t>(layout.sequence_bits);
  out.core_bits = static_cast<std::uint8_t>(layout.core_bits);
  out.core_from = layout.core_from == proto::CoreBitsFrom::node ? 1 : 0;
  return out;
}

Identity identity_of(std::uint32_t node_id, const proto::Layout& layout) {
  return Identity{node_id, layout.fingerprint(), layout_record(layout)};
}

const Identity default_identity = identity_of(7, proto::Layout{});

testing::TestLayout test_layout(const LayoutRecord& l) {
  return {l.epoch_ms, l.time_unit_ms, l.time_bits, l.node_bits, l.sequence_bits, l.core_bits, l.core_from};
}

testing::TestLayout default_identity_test_layout() { return test_layout(default_identity.layout); }

// A new (or reset) file: the initial record (version 2, sequence 0, W 0, the creating
// identity) in slot 0, every other byte zero.
void expect_initial_file(const std::vector<std::uint8_t>& bytes,
                         const Identity& identity = default_identity) {
  ASSERT_EQ(bytes.size(), testing::watermark_file_bytes);
  const auto initial = testing::decode(bytes, 0);
  ASSERT_TRUE(initial.has_value());
  EXPECT_EQ(initial->version, 2u);
  EXPECT_FALSE(initial->v1_format);
  EXPECT_EQ(initial->sequence, 0u);
  EXPECT_EQ(initial->watermark_t, 0u);
  EXPECT_EQ(initial->node_id, identity.node_id);
  EXPECT_EQ(initial->layout_fingerprint, identity.layout_fingerprint);
  EXPECT_EQ(initial->layout, test_layout(identity.layout));
  EXPECT_TRUE(testing::all_zero(bytes, testing::slot_bytes, bytes.size() - testing::slot_bytes));
}

std::string method_name(bool io_uring) { return io_uring ? "io_uring" : "pwrite+fdatasync"; }

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

class WatermarkStoreTest : public ::testing::TestWithParam<bool> {
 protected:
  bool io_uring() const { return GetParam(); }

  OpenOptions options() const {
    OpenOptions o;
    o.use_io_uring = io_uring();
    return o;
  }

  // Opens and checks that the requested method is the one in use.
  std::unique_ptr<WatermarkStore> open_ok(const std::string& dir,
                                          const Identity& identity = default_identity) {
    return open_with(dir, identity, options());
  }

  std::unique_ptr<WatermarkStore> open_with(const std::string& dir, const Identity& identity,
                                            const OpenOptions& o) {
    std::string error;
    auto store = testing::open_store(dir, identity, o, &error);
    EXPECT_NE(store, nullptr) << error;
    if (store != nullptr) {
      EXPECT_EQ(store->method(), method_name(io_uring()));
    }
    return store;
  }

  std::string open_error(const std::string& dir, const Identity& identity = default_identity) {
    std::string error;
    auto store = testing::open_store(dir, identity, options(), &error);
    EXPECT_EQ(store, nullptr);
    return error;
  }

  void store_ok(WatermarkStore& store, std::uint64_t watermark_t) {
    std::string error;
    ASSERT_TRUE(is_ok(store.store(watermark_t)));
    ASSERT_EQ(store.durable_watermark_t(), watermark_t);
  }

  // A state dir holding the records (1, 100) in slot 1 ... (n, n * 100); the latest is
  // sequence n in slot n % 2. Returns the file's bytes.
  std::vector<std::uint8_t> prepare(const std::string& dir, int records) {
    auto store = open_ok(dir);
    for (int i = 1; i <= records; ++i) store_ok(*store, static_cast<std::uint64_t>(i) * 100);
    return testing::read_file(dir + "/watermark");
  }

  void SetUp() override {
    log_capture.warnings();  // nothing logged before this test counts
    if (!io_uring()) return;
    // Skip the io_uring half only on a machine without io_uring.
    TempDir probe_dir;
    std::string error;
    auto store = testing::open_store(probe_dir.path(), default_identity, options(), &error);
    ASSERT_NE(store, nullptr) << error;
    if (store->method() != "io_uring") {
      GTEST_SKIP() << "io_uring unavailable here: " << join(log_capture.warnings());
    }
    log_capture.warnings();
  }
};

INSTANTIATE_TEST_SUITE_P(Methods, WatermarkStoreTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("io_uring") : std::string("pwrite");
                         });

TEST_P(WatermarkStoreTest, NewStoreStartsAtZeroWithOnlyTheInitialRecord) {
  TempDir tmp;
  const std::string dir = tmp.sub("a/state");  // parents are created too
  auto store = open_ok(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->loaded().has_value());
  EXPECT_EQ(store->durable_watermark_t(), 0u);
  EXPECT_EQ(store->sequence(), 0u);
  EXPECT_EQ(store->stores(), 0u);
  EXPECT_EQ(store->store_failures(), 0u);
  EXPECT_TRUE(log_capture.warnings().empty());
  EXPECT_EQ(store->path(), dir + "/watermark");
  EXPECT_EQ(testing::mode_of(tmp.sub("a")), 0700u);
  EXPECT_EQ(testing::mode_of(dir), 0700u);
  EXPECT_EQ(testing::mode_of(dir + "/watermark"), 0600u);
  expect_initial_file(testing::read_file(dir + "/watermark"));
  // Only the file itself: the temporary file was moved into place.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);

  // Reopening a new, never stored file is still "new", without warnings.
  store.reset();
  store = open_ok(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->loaded().has_value());
  EXPECT_EQ(store->durable_watermark_t(), 0u);
  EXPECT_TRUE(log_capture.warnings().empty());
}

TEST_P(WatermarkStoreTest, ReopenKeepsTheHighestWatermark) {
  TempDir tmp;
  const auto before_ms = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        std::chrono::system_clock::now().time_since_epoch())
                                                        .count());
  {
    auto store = open_ok(tmp.path());
    ASSERT_NE(store, nullptr);
    store_ok(*store, 100);
    store_ok(*store, 250);
    store_ok(*store, 250);  // the same W again is allowed
    store_ok(*store, 900);
    EXPECT_EQ(store->stores(), 4u);
    EXPECT_EQ(store->sequence(), 4u);
    EXPECT_GT(store->last_store_latency_ns(), 0u);
  }
  const auto after_ms = before_ms + 60'000;
  auto store = open_ok(tmp.path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 900u);
  ASSERT_TRUE(store->loaded().has_value());
  EXPECT_EQ(store->loaded()->sequence, 4u);
  EXPECT_EQ(store->loaded()->watermark_t, 900u);
  EXPECT_EQ(store->loaded()->node_id, default_identity.node_id);
  EXPECT_EQ(store->loaded()->layout_fingerprint, default_identity.layout_fingerprint);
  EXPECT_GE(store->loaded()->written_unix_ms, before_ms);
  EXPECT_LE(store->loaded()->written_unix_ms, after_ms);
  EXPECT_TRUE(log_capture.warnings().empty());
  // Sequences continue across a reopen.
  store_ok(*store, 1000);
  EXPECT_EQ(store->sequence(), 5u);
}

TEST_P(WatermarkStoreTest, StoresAlternateSlotsAndKeepThePreviousRecord) {
  TempDir tmp;
  auto store = open_ok(tmp.path());
  ASSERT_NE(store, nullptr);
  const std::string path = tmp.sub("watermark");
  for (std::uint64_t i = 1; i <= 6; ++i) {
    store_ok(*store, i * 10);
    const auto bytes = testing::read_file(path);
    ASSERT_EQ(bytes.size(), testing::watermark_file_bytes) << "the file never changes size";
    const auto latest = testing::decode(bytes, testing::slot_offset[i % 2]);
    ASSERT_TRUE(latest.has_value()) << "after store " << i;
    EXPECT_EQ(latest->sequence, i);
    EXPECT_EQ(latest->watermark_t, i * 10);
    EXPECT_EQ(latest->node_id, default_identity.node_id);
    EXPECT_EQ(latest->layout_fingerprint, default_identity.layout_fingerprint);
    EXPECT_EQ(latest->version, 2u);
    EXPECT_FALSE(latest->v1_format);
    EXPECT_EQ(latest->layout, default_identity_test_layout());
    const std::uint64_t other_offset = testing::slot_offset[(i + 1) % 2];
    if (i == 1) {
      const auto initial = testing::decode(bytes, other_offset);
      ASSERT_TRUE(initial.has_value()) << "the initial record stays until store 2";
      EXPECT_EQ(initial->sequence, 0u);
    } else {
      const auto previous = testing::decode(bytes, other_offset);
      ASSERT_TRUE(previous.has_value());
      EXPECT_EQ(previous->sequence, i - 1);
      EXPECT_EQ(previous->watermark_t, (i - 1) * 10);
    }
    // Bytes outside the two slots stay zero.
    EXPECT_TRUE(testing::all_zero(bytes, 128, 4096 - 128));
    EXPECT_TRUE(testing::all_zero(bytes, 4096 + 128, 4096 - 128));
  }
}

std::vector<std::uint8_t> flipped(std::vector<std::uint8_t> slot, std::size_t byte) {
  slot.at(byte) ^= 0x5A;
  return slot;
}

TEST_P(WatermarkStoreTest, AnyDamageToOneSlotRecoversFromTheOtherWithAWarning) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string path = dir + "/watermark";
  // Records: sequence 2 (W 200) in slot 0, sequence 3 (W 300, the latest) in slot 1.
  const auto pristine = prepare(dir, 3);
  ASSERT_TRUE(testing::decode(pristine, 4096).has_value());
  const std::vector<std::uint8_t> slot0(pristine.begin(), pristine.begin() + 128);
  const std::vector<std::uint8_t> slot1(pristine.begin() + 4096, pristine.begin() + 4096 + 128);

  struct Case {
    std::string name;
    std::function<void()> damage;
    std::uint64_t expected_w;
    std::vector<std::string> warning_parts;
  };
  std::vector<Case> cases;
  for (std::size_t byte = 0; byte < testing::slot_bytes; ++byte) {
    cases.push_back({"flip byte " + std::to_string(byte) + " of the older slot 0",
                     [&, byte] { testing::write_at(path, 0, flipped(slot0, byte)); },
                     300,
                     {"slot 0 (offset 0) is corrupt", "recovered watermark 300 (sequence 3)"}});
    cases.push_back({"flip byte " + std::to_string(byte) + " of the latest slot 1",
                     [&, byte] { testing::write_at(path, 4096, flipped(slot1, byte)); },
                     200,
                     {"slot 1 (offset 4096) is corrupt", "recovered watermark 200 (sequence 2)"}});
  }
  cases.push_back({"zero the older slot 0",
                   [&] { testing::write_at(path, 0, std::vector<std::uint8_t>(128, 0)); },
                   300,
                   {"slot 0 (offset 0) is zeroed", "recovered watermark 300"}});
  cases.push_back({"zero the latest slot 1",
                   [&] { testing::write_at(path, 4096, std::vector<std::uint8_t>(128, 0)); },
                   200,
                   {"slot 1 (offset 4096) is zeroed", "recovered watermark 200"}});
  cases.push_back(
      {"truncate to 4096 bytes (slot 1, the latest, is gone)",
       [&] { testing::truncate_file(path, 4096); },
       200,
       {"slot 1 (offset 4096) is corrupt (truncated (the file is 4096 bytes))", "recovered watermark 200"}});
  cases.push_back({"truncate inside slot 1",
                   [&] { testing::truncate_file(path, 4096 + 63); },
                   200,
                   {"slot 1 (offset 4096) is corrupt (truncated", "recovered watermark 200"}});
  cases.push_back({"garbage in slot 0",
                   [&] { testing::write_at(path, 0, std::vector<std::uint8_t>(128, 0xA5)); },
                   300,
                   {"slot 0 (offset 0) is corrupt (bad magic)"}});
  cases.push_back(
      {"valid CRC but unknown version in slot 0",
       [&] {
         testing::TestRecord r{
             2, 200, 7, default_identity.layout_fingerprint, 0, 9, default_identity_test_layout()};
         testing::write_at(path, 0, testing::encode(r));
       },
       300,
       {"unknown format version 9"}});
  cases.push_back(
      {"valid CRC but a sequence of the wrong parity in slot 0",
       [&] {
         testing::TestRecord r{
             5, 500, 7, default_identity.layout_fingerprint, 0, 2, default_identity_test_layout()};
         testing::write_at(path, 0, testing::encode(r));
       },
       300,
       {"sequence 5 does not belong in slot 0"}});

  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    testing::write_whole(path, pristine);
    c.damage();
    auto store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->durable_watermark_t(), c.expected_w);
    const auto warnings = log_capture.warnings();
    ASSERT_EQ(warnings.size(), 1u) << join(warnings);
    EXPECT_THAT(warnings[0], HasSubstr(path));
    for (const auto& part : c.warning_parts) EXPECT_THAT(warnings[0], HasSubstr(part));
    // The next store overwrites the damaged slot: a reopen is clean and at the new W.
    store_ok(*store, c.expected_w + 1);
    store.reset();
    store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->durable_watermark_t(), c.expected_w + 1);
    EXPECT_TRUE(log_capture.warnings().empty());
  }
}

// A crash that tears the very first store leaves the initial record in slot 0 and a corrupt
// slot 1: new, W 0, with a warning (nothing was acknowledged). Without the initial record (a
// file created by the version-1 code) the same damage cannot be told from two damaged slots
// and is refused. The initial record is only valid as sequence 0, W 0, version 2, in slot 0.
TEST_P(WatermarkStoreTest, ATornFirstStoreFallsBackToTheInitialRecord) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string path = dir + "/watermark";
  {
    auto store = open_ok(dir);
    ASSERT_NE(store, nullptr);
  }
  const auto initial = testing::read_file(path);
  const auto first = testing::encode({1, 100, default_identity.node_id, default_identity.layout_fingerprint,
                                      0, 2, default_identity_test_layout()});
  for (const std::size_t k : {std::size_t{1}, std::size_t{64}, testing::slot_bytes - 1}) {
    SCOPED_TRACE("torn after " + std::to_string(k) + " bytes");
    testing::write_whole(path, initial);
    testing::write_at(
        path, 4096, std::vector<std::uint8_t>(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(k)));
    auto store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_FALSE(store->loaded().has_value());
    EXPECT_EQ(store->durable_watermark_t(), 0u);
    const auto warnings = log_capture.warnings();
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("slot 1 (offset 4096) is corrupt"));
    EXPECT_THAT(warnings[0], HasSubstr("holds the initial record, so starting from watermark 0"));
    store_ok(*store, 100);
    store.reset();
    store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->durable_watermark_t(), 100u);
    EXPECT_TRUE(log_capture.warnings().empty());
  }
  // A version-1 new file (two empty slots) still opens as new; torn, it is refused.
  testing::write_whole(path, std::vector<std::uint8_t>(testing::watermark_file_bytes, 0));
  {
    auto store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_FALSE(store->loaded().has_value());
    EXPECT_TRUE(log_capture.warnings().empty());
  }
  testing::write_at(path, 4096, std::vector<std::uint8_t>(first.begin(), first.begin() + 10));
  EXPECT_THAT(open_error(dir), HasSubstr("holds no valid watermark record"));
  // Sequence 0 anywhere else, or with a watermark, or in version 1, is corrupt.
  const auto fp = default_identity.layout_fingerprint;
  const std::vector<std::pair<std::string, std::function<void()>>> bad = {
      {"sequence 0 in slot 1",
       [&] {
         testing::write_whole(path, std::vector<std::uint8_t>(testing::watermark_file_bytes, 0));
         testing::write_at(path, 4096, testing::encode({0, 0, 7, fp, 0, 2, default_identity_test_layout()}));
       }},
      {"sequence 0 with a watermark",
       [&] {
         testing::write_whole(path, std::vector<std::uint8_t>(testing::watermark_file_bytes, 0));
         testing::write_at(path, 0, testing::encode({0, 5, 7, fp, 0, 2, default_identity_test_layout()}));
       }},
      {"sequence 0 in version 1",
       [&] {
         testing::write_whole(path, std::vector<std::uint8_t>(testing::watermark_file_bytes, 0));
         testing::write_at(path, 0, testing::encode(testing::v1_record(0, 0, 7, fp)));
       }},
  };
  for (const auto& [name, damage] : bad) {
    SCOPED_TRACE(name);
    damage();
    const std::string error = open_error(dir);
    EXPECT_THAT(error, HasSubstr("does not belong in slot"));
  }
}

TEST_P(WatermarkStoreTest, TruncatedLatestSlot0RecoversFromSlot1) {
  TempDir tmp;
  prepare(tmp.path(), 4);  // latest: sequence 4 (W 400) in slot 0
  testing::truncate_file(tmp.sub("watermark"), 4096);
  auto store = open_ok(tmp.path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 400u);
  const auto warnings = log_capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("slot 1 (offset 4096) is corrupt (truncated"));
  store_ok(*store, 500);  // sequence 5 goes to slot 1 and extends the file again
  store.reset();
  store = open_ok(tmp.path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 500u);
  EXPECT_TRUE(log_capture.warnings().empty());
}

TEST_P(WatermarkStoreTest, NoValidSlotFailsNamingTheFileAndTheOverride) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string path = dir + "/watermark";
  const auto pristine = prepare(dir, 3);
  const std::vector<std::uint8_t> slot0(pristine.begin(), pristine.begin() + 128);
  const std::vector<std::uint8_t> slot1(pristine.begin() + 4096, pristine.begin() + 4096 + 128);

  const std::vector<std::pair<std::string, std::function<void()>>> damages = {
      {"both slots flipped",
       [&] {
         testing::write_at(path, 0, flipped(slot0, 20));
         testing::write_at(path, 4096, flipped(slot1, 61));
       }},
      {"slot 0 flipped, slot 1 zeroed",
       [&] {
         testing::write_at(path, 0, flipped(slot0, 3));
         testing::write_at(path, 4096, std::vector<std::uint8_t>(128, 0));
       }},
      {"truncated to 10 bytes (slot 0 torn, slot 1 gone)", [&] { testing::truncate_file(path, 10); }},
      {"truncated to 0 bytes", [&] { testing::truncate_file(path, 0); }},
  };
  for (const auto& [name, damage] : damages) {
    SCOPED_TRACE(name);
    testing::write_whole(path, pristine);
    damage();
    const auto damaged = testing::read_file(path);
    const std::string error = open_error(dir);
    EXPECT_THAT(error, HasSubstr(path));
    EXPECT_THAT(error, HasSubstr("holds no valid watermark record"));
    EXPECT_THAT(error, HasSubstr("--accept-corrupt-state"));
    EXPECT_EQ(testing::read_file(path), damaged) << "a failed open must not touch the file";
  }
}

TEST_P(WatermarkStoreTest, AcceptCorruptStartsAsNewSavesTheBytesAndSaysItIsDangerous) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string path = dir + "/watermark";
  prepare(dir, 3);
  testing::truncate_file(path, 10);
  const auto damaged = testing::read_file(path);
  OpenOptions o = options();
  o.accept_corrupt = true;
  auto store = open_with(dir, default_identity, o);
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->loaded().has_value());
  EXPECT_EQ(store->durable_watermark_t(), 0u);
  const auto warnings = log_capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("DANGEROUS"));
  EXPECT_THAT(warnings[0], HasSubstr("--accept-corrupt-state"));
  EXPECT_THAT(warnings[0], HasSubstr(path));
  EXPECT_THAT(warnings[0], HasSubstr("may be issued again"));
  // The corrupt bytes were kept for the post-mortem.
  int saved = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("watermark.corrupt-", 0) == 0) {
      ++saved;
      EXPECT_EQ(testing::read_file(entry.path().string()), damaged);
      EXPECT_THAT(warnings[0], HasSubstr(entry.path().string()));
    }
  }
  EXPECT_EQ(saved, 1);
  // The file is new again (the initial record only), so a later start needs no override.
  expect_initial_file(testing::read_file(path));
  store_ok(*store, 50);
  store.reset();
  store = open_ok(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 50u);
  EXPECT_TRUE(log_capture.warnings().empty());
}

TEST_P(WatermarkStoreTest, IdentityMismatchFailsNamingBothValuesAndTheOverride) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string path = dir + "/watermark";
  const auto snowflake = proto::Layout{}.fingerprint();
  const auto js_safe = proto::layout_preset("js-safe")->fingerprint();
  ASSERT_NE(snowflake, js_safe);
  const Identity node1_snowflake = identity_of(1, proto::Layout{});
  const Identity node2_snowflake = identity_of(2, proto::Layout{});
  const Identity node1_js_safe = identity_of(1, *proto::layout_preset("js-safe"));
  const Identity node2_js_safe = identity_of(2, *proto::layout_preset("js-safe"));
  {
    auto store = open_ok(dir, node1_snowflake);
    ASSERT_NE(store, nullptr);
    store_ok(*store, 100);
  }
  const auto before = testing::read_file(path);

  std::string error = open_error(dir, node2_snowflake);
  EXPECT_THAT(error, HasSubstr(path));
  EXPECT_THAT(error, HasSubstr("node 1 with layout fingerprint " + testing::hex64(snowflake)));
  EXPECT_THAT(error, HasSubstr("node 2 with layout fingerprint " + testing::hex64(snowflake)));
  EXPECT_THAT(error, HasSubstr("--accept-state-change"));

  error = open_error(dir, node1_js_safe);
  EXPECT_THAT(error, HasSubstr(path));
  EXPECT_THAT(error, HasSubstr("node 1 with layout fingerprint " + testing::hex64(snowflake)));
  EXPECT_THAT(error, HasSubstr("node 1 with layout fingerprint " + testing::hex64(js_safe)));
  EXPECT_THAT(error, HasSubstr("--accept-state-change"));
  EXPECT_EQ(testing::read_file(path), before);

  // The override keeps the watermark and adopts the new identity.
  OpenOptions o = options();
  o.accept_identity_change = true;
  auto store = open_with(dir, node2_js_safe, o);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 100u);
  ASSERT_TRUE(store->loaded().has_value());
  EXPECT_EQ(store->loaded()->node_id, 1u);
  EXPECT_EQ(store->loaded()->layout, node1_snowflake.layout) << "the foreign record's layout";
  // Accepted silently: what to do with the foreign record is the caller's decision (the state
  // directory's reconcile), and the caller says what it decided.
  EXPECT_TRUE(log_capture.warnings().empty());
  store_ok(*store, 120);
  store.reset();
  store = open_ok(dir, node2_js_safe);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 120u);
  EXPECT_EQ(store->loaded()->node_id, 2u);
  EXPECT_EQ(store->loaded()->layout_fingerprint, js_safe);
  EXPECT_EQ(store->loaded()->layout, node2_js_safe.layout);
  EXPECT_TRUE(log_capture.warnings().empty());
  store.reset();
  EXPECT_THAT(open_error(dir, node1_snowflake), HasSubstr("--accept-state-change"));
}

// Every record carries the layout it was written under, whatever its numbers.
TEST_P(WatermarkStoreTest, RecordsCarryTheLayoutTheyWereWrittenUnder) {
  TempDir tmp;
  Identity identity{3, 0xfeed'beef'0000'0001ull, {}};
  identity.layout = {1'700'000'000'123ull, 1000, 33, 17, 13, 4, 1};
  {
    auto store = open_ok(tmp.path(), identity);
    ASSERT_NE(store, nullptr);
    store_ok(*store, 42);
  }
  const auto bytes = testing::read_file(tmp.sub("watermark"));
  const auto slot = testing::decode(bytes, testing::slot_offset[1]);
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->version, 2u);
  const testing::TestLayout expected{1'700'000'000'123ull, 1000, 33, 17, 13, 4, 1};
  EXPECT_EQ(slot->layout, expected);
  auto store = open_ok(tmp.path(), identity);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->loaded().has_value());
  EXPECT_EQ(store->loaded()->format_version, 2u);
  ASSERT_TRUE(store->loaded()->layout.has_value());
  EXPECT_EQ(*store->loaded()->layout, identity.layout);
  EXPECT_EQ(store->durable_watermark_t(), 42u);
}

// A file written by the version-1 code (64-byte records, no layout) opens as before; its
// layout is reported unknown; stores write version 2 and the file may hold one of each.
TEST_P(WatermarkStoreTest, Version1FilesAreReadWithAnUnknownLayoutAndUpgradedByStores) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string path = dir + "/watermark";
  std::vector<std::uint8_t> file(testing::watermark_file_bytes, 0);
  const auto fp = default_identity.layout_fingerprint;
  const auto put = [&](std::uint64_t at, const testing::TestRecord& r) {
    const auto slot = testing::encode(r);
    std::copy(slot.begin(), slot.end(), file.begin() + static_cast<std::ptrdiff_t>(at));
  };
  put(0, testing::v1_record(2, 200, 7, fp, 1111));
  put(4096, testing::v1_record(3, 300, 7, fp, 2222));
  // Exactly the 64 bytes the old code wrote per slot.
  EXPECT_TRUE(testing::all_zero(file, 64, 4096 - 64));
  testing::write_whole(path, file);
  {
    auto store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(log_capture.warnings().empty());
    EXPECT_EQ(store->durable_watermark_t(), 300u);
    EXPECT_EQ(store->sequence(), 3u);
    ASSERT_TRUE(store->loaded().has_value());
    EXPECT_EQ(store->loaded()->format_version, 1u);
    EXPECT_FALSE(store->loaded()->layout.has_value()) << "a version-1 layout is unknown";
    EXPECT_EQ(store->loaded()->written_unix_ms, 2222u);
    store_ok(*store, 400);  // sequence 4: slot 0 becomes version 2, slot 1 stays version 1
  }
  const auto mixed = testing::read_file(path);
  const auto slot0 = testing::decode(mixed, 0);
  const auto slot1 = testing::decode(mixed, 4096);
  ASSERT_TRUE(slot0.has_value() && slot1.has_value());
  EXPECT_EQ(slot0->version, 2u);
  EXPECT_EQ(slot1->version, 1u);
  EXPECT_TRUE(slot1->v1_format);
  {
    auto store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(log_capture.warnings().empty());
    EXPECT_EQ(store->durable_watermark_t(), 400u);
    EXPECT_EQ(store->loaded()->format_version, 2u);
    EXPECT_EQ(store->loaded()->layout, default_identity.layout);
  }
  // The latest record version 1, the older version 2 (a downgrade and upgrade): still fine.
  put(0, testing::TestRecord{4, 400, 7, fp, 0, 2, default_identity_test_layout()});
  put(4096, testing::v1_record(5, 500, 7, fp));
  testing::write_whole(path, file);
  auto store = open_ok(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(log_capture.warnings().empty());
  EXPECT_EQ(store->durable_watermark_t(), 500u);
  EXPECT_FALSE(store->loaded()->layout.has_value());

  // A version-1 record whose 64 zero bytes after it are not zero is corrupt, and a version
  // field that disagrees with the CRC position is refused.
  auto dirty = testing::encode(testing::v1_record(5, 500, 7, fp));
  dirty[100] = 1;
  put(0, testing::TestRecord{4, 400, 7, fp, 0, 2, default_identity_test_layout()});
  std::copy(dirty.begin(), dirty.end(), file.begin() + 4096);
  testing::write_whole(path, file);
  store.reset();
  store = open_ok(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 400u);
  auto warnings = log_capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("slot 1 (offset 4096) is corrupt (CRC mismatch"));
  put(4096, testing::v1_record(5, 500, 7, fp, 0, 2));  // v1 encoding claiming version 2
  testing::write_whole(path, file);
  store.reset();
  store = open_ok(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 400u);
  warnings = log_capture.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("unknown format version 2"));
}

class AdoptTest : public WatermarkStoreTest {
 protected:
  const Identity old_identity = identity_of(1, proto::Layout{});
  const Identity new_identity = identity_of(1, *proto::layout_preset("js-safe"));

  OpenOptions accepting() const {
    OpenOptions o = options();
    o.accept_identity_change = true;
    return o;
  }
  // A state dir whose latest record is (old_identity, W 5000), sequence 2.
  void prepare_old(const std::string& dir) {
    auto store = open_ok(dir, old_identity);
    ASSERT_NE(store, nullptr);
    store_ok(*store, 4000);
    store_ok(*store, 5000);
  }
};

INSTANTIATE_TEST_SUITE_P(Methods, AdoptTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("io_uring") : std::string("pwrite");
                         });

TEST_P(AdoptTest, AdoptRewritesTheRecordWithALowerCarriedWatermark) {
  TempDir tmp;
  const std::string dir = tmp.path();
  prepare_old(dir);
  {
    auto store = open_with(dir, new_identity, accepting());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->loaded().has_value());
    EXPECT_EQ(store->loaded()->layout, old_identity.layout);
    EXPECT_EQ(store->loaded()->watermark_t, 5000u);
    log_capture.warnings();
    std::string error;
    ASSERT_TRUE(is_ok(store->adopt(new_identity, 17)));
    EXPECT_EQ(store->durable_watermark_t(), 17u);
    EXPECT_EQ(store->identity(), new_identity);
    EXPECT_EQ(store->sequence(), 3u);
    EXPECT_EQ(store->loaded()->watermark_t, 5000u) << "loaded() still shows what open found";
    const auto warnings = log_capture.warnings();
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("adopted node 1 with layout fingerprint " +
                                       testing::hex64(new_identity.layout_fingerprint)));
    EXPECT_THAT(warnings[0], HasSubstr("carried watermark 17 (was 5000"));
    // From now on the never-decrease rule holds in the new units.
    error = failure(store->store(16));
    EXPECT_THAT(error, HasSubstr("lower the durable watermark 17"));
    error = failure(store->adopt(new_identity, 10));  // "adopt only right after open"
    EXPECT_THAT(error, HasSubstr("only allowed right after open()"));
    EXPECT_EQ(store->durable_watermark_t(), 17u);
  }
  // Durable: a reopen under the new identity needs no override, finds 17 and is not misled
  // by the older slot, which still holds the old identity's higher 5000 in other units (W of
  // different identities are never compared).
  const auto bytes = testing::read_file(dir + "/watermark");
  const auto older = testing::decode(bytes, testing::slot_offset[0]);
  ASSERT_TRUE(older.has_value());
  EXPECT_EQ(older->watermark_t, 5000u);
  EXPECT_EQ(older->layout_fingerprint, old_identity.layout_fingerprint);
  {
    auto store = open_ok(dir, new_identity);
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(log_capture.warnings().empty());
    EXPECT_EQ(store->durable_watermark_t(), 17u);
    EXPECT_EQ(store->loaded()->layout, new_identity.layout);
    store_ok(*store, 18);
  }
  // And the old identity is now the foreign one.
  EXPECT_THAT(open_error(dir, old_identity), HasSubstr("--accept-state-change"));
}

TEST_P(AdoptTest, AdoptMayRaiseTheWatermarkToo) {
  TempDir tmp;
  prepare_old(tmp.path());
  auto store = open_with(tmp.path(), new_identity, accepting());
  ASSERT_NE(store, nullptr);
  std::string error;
  ASSERT_TRUE(is_ok(store->adopt(new_identity, 9'000'000)));
  store.reset();
  store = open_ok(tmp.path(), new_identity);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 9'000'000u);
}

TEST_P(AdoptTest, AdoptIsRefusedOutsideItsOneUseAndWritesNothing) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string path = dir + "/watermark";
  std::string error;
  {  // A new file: nothing to adopt from.
    auto store = open_with(dir, new_identity, accepting());
    ASSERT_NE(store, nullptr);
    error = failure(store->adopt(new_identity, 1));
    EXPECT_THAT(error, HasSubstr("holds no record to adopt from; use store()"));
    EXPECT_THAT(error, HasSubstr(path));
  }
  TempDir tmp2;
  prepare_old(tmp2.path());
  const auto before = testing::read_file(tmp2.sub("watermark"));
  {  // Opened without the override (same identity, so open succeeds).
    auto store = open_ok(tmp2.path(), old_identity);
    ASSERT_NE(store, nullptr);
    error = failure(store->adopt(new_identity, 1));
    EXPECT_THAT(error, HasSubstr("accept_identity_change"));
    EXPECT_THAT(error, HasSubstr("--accept-state-change"));
    EXPECT_EQ(store->durable_watermark_t(), 5000u);
  }
  {  // With the override, but the record already has this identity: it would lower W.
    auto store = open_with(tmp2.path(), old_identity, accepting());
    ASSERT_NE(store, nullptr);
    error = failure(store->adopt(old_identity, 1));
    EXPECT_THAT(error, HasSubstr("already belongs to it"));
    EXPECT_EQ(store->durable_watermark_t(), 5000u);
  }
  EXPECT_EQ(testing::read_file(tmp2.sub("watermark")), before) << "a refused adopt writes nothing";
  {  // After a successful store() (which keeps the stored W and records the new identity).
    auto store = open_with(tmp2.path(), new_identity, accepting());
    ASSERT_NE(store, nullptr);
    store_ok(*store, 5000);
    EXPECT_FALSE(store->adopt(new_identity, 1).ok());
    error = failure(store->adopt(new_identity, 1));
    EXPECT_THAT(error, HasSubstr("only allowed right after open()"));
    EXPECT_EQ(store->durable_watermark_t(), 5000u);
  }
}

TEST_P(WatermarkStoreTest, LoweringTheWatermarkIsRefused) {
  TempDir tmp;
  auto store = open_ok(tmp.path());
  ASSERT_NE(store, nullptr);
  store_ok(*store, 500);
  const auto before = testing::read_file(tmp.sub("watermark"));
  std::string error;
  error = failure(store->store(499));
  EXPECT_THAT(error, HasSubstr("lower"));
  EXPECT_THAT(error, HasSubstr("499"));
  EXPECT_THAT(error, HasSubstr("500"));
  EXPECT_EQ(store->durable_watermark_t(), 500u);
  EXPECT_EQ(store->stores(), 1u);
  EXPECT_EQ(store->store_failures(), 1u);
  EXPECT_EQ(testing::read_file(tmp.sub("watermark")), before) << "nothing was written";
  EXPECT_FALSE(store->store(0).ok());
  store_ok(*store, 500);
  store_ok(*store, 501);
  store.reset();
  store = open_ok(tmp.path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 501u);
}

// A crash after the write was submitted but before fdatasync returned leaves the slot being
// written (never the latest acknowledged one) in any state: untouched, torn at any byte,
// zero-filled after a torn prefix, complete. No reopen may go below the acknowledged W.
TEST_P(WatermarkStoreTest, CrashBetweenWriteAndFsyncNeverReopensBelowTheAcknowledgedWatermark) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string path = dir + "/watermark";
  const auto pristine = prepare(dir, 3);  // acknowledged: W 300, sequence 3, in slot 1
  const std::vector<std::uint8_t> old_slot0(pristine.begin(), pristine.begin() + 128);
  // The write in flight: sequence 4, W 400, into slot 0.
  const auto next = testing::encode({4, 400, default_identity.node_id, default_identity.layout_fingerprint, 1,
                                     2, default_identity_test_layout()});

  struct Case {
    std::string name;
    std::vector<std::uint8_t> slot0;
    std::uint64_t expected_w;
  };
  std::vector<Case> cases;
  auto bad_crc = next;
  bad_crc[60] ^= 1;
  cases.push_back({"newer record with a bad CRC", bad_crc, 300});
  cases.push_back({"write never reached the disk (stale sequence 2)", old_slot0, 300});
  cases.push_back({"complete write, fsync never returned", next, 400});
  for (std::size_t k = 1; k < testing::slot_bytes; ++k) {
    auto torn = old_slot0;
    std::copy(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(k), torn.begin());
    cases.push_back(
        {"torn after " + std::to_string(k) + " bytes over the old record", torn, torn == next ? 400u : 300u});
    auto torn_zero = std::vector<std::uint8_t>(128, 0);
    std::copy(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(k), torn_zero.begin());
    cases.push_back({"torn after " + std::to_string(k) + " bytes over zeros", torn_zero, 300});
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    testing::write_whole(path, pristine);
    testing::write_at(path, 0, c.slot0);
    auto store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    EXPECT_GE(store->durable_watermark_t(), 300u);
    EXPECT_EQ(store->durable_watermark_t(), c.expected_w);
  }
}

// Seeded property: random stores, then random damage to the slot that is not the latest
// (bit flips, zeroing, garbage, stale records, torn or complete unacknowledged writes,
// truncation). A reopen never returns below the last acknowledged W, and returns exactly it
// unless an unacknowledged write landed complete. Replay with FLURRY_TEST_SEED=<seed>.
TEST_P(WatermarkStoreTest, PropertyReopenNeverGoesBelowTheLastAcknowledgedWatermark) {
  std::uint64_t seed = 0x5eed'f1u ^ (io_uring() ? 1u : 0u);
  if (const char* env = std::getenv("FLURRY_TEST_SEED")) seed = std::strtoull(env, nullptr, 0);
  std::cout << "[ seed     ] FLURRY_TEST_SEED=" << seed << "\n";
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng);
  };

  TempDir tmp;
  const std::string dir = tmp.path();
  const std::string path = dir + "/watermark";
  std::uint64_t acknowledged = 0;
  constexpr int rounds = 120;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " round " + std::to_string(round));
    auto store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    ASSERT_GE(store->durable_watermark_t(), acknowledged);
    acknowledged = store->durable_watermark_t();
    const int stores = 1 + static_cast<int>(pick(3));
    for (int i = 0; i < stores; ++i) {
      const std::uint64_t w = acknowledged + pick(4);
      std::string error;
      ASSERT_TRUE(is_ok(store->store(w)));
      acknowledged = w;
    }
    const std::uint64_t latest_sequence = store->sequence();
    store.reset();

    const std::size_t other = (latest_sequence + 1) % 2;
    const std::uint64_t at = testing::slot_offset[other];
    std::uint64_t expected = acknowledged;
    switch (pick(8)) {
      case 0: {  // flip one bit anywhere in the slot
        auto bytes = testing::read_file(path);
        bytes.at(at + pick(testing::slot_bytes)) ^= static_cast<std::uint8_t>(1u << pick(8));
        testing::write_whole(path, bytes);
        break;
      }
      case 1:
        testing::write_at(path, at, std::vector<std::uint8_t>(128, 0));
        break;
      case 2: {
        std::vector<std::uint8_t> garbage(testing::slot_bytes);
        for (auto& b : garbage) b = static_cast<std::uint8_t>(pick(256));
        testing::write_at(path, at, garbage);
        break;
      }
      case 3: {  // a stale, older record of the right parity: L-1, L-3, ... >= 1
        const std::uint64_t candidates = latest_sequence / 2;
        if (candidates == 0) break;
        const std::uint64_t sequence = latest_sequence - 1 - 2 * pick(candidates);
        testing::write_at(
            path, at,
            testing::encode({sequence, pick(acknowledged + 1), default_identity.node_id,
                             default_identity.layout_fingerprint, 0, 2, default_identity_test_layout()}));
        break;
      }
      case 4: {  // the next write, torn after k bytes (k == 128: it landed complete)
        const auto next =
            testing::encode({latest_sequence + 1, acknowledged + 1 + pick(10), default_identity.node_id,
                             default_identity.layout_fingerprint, 0, 2, default_identity_test_layout()});
        const std::size_t k = pick(testing::slot_bytes + 1);
        auto bytes = testing::read_file(path);
        std::copy(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(k),
                  bytes.begin() + static_cast<std::ptrdiff_t>(at));
        testing::write_whole(path, bytes);
        // Complete (k == 128, or the old tail happened to match): the unacknowledged W landed.
        if (const auto landed = testing::decode(bytes, at);
            landed && landed->sequence == latest_sequence + 1) {
          expected = landed->watermark_t;
        }
        break;
      }
      case 5:
        if (other == 1) testing::truncate_file(path, 4096 + pick(testing::slot_bytes));
        break;
      default:
        break;  // no damage
    }
    store = open_ok(dir);
    ASSERT_NE(store, nullptr);
    ASSERT_GE(store->durable_watermark_t(), acknowledged);
    ASSERT_EQ(store->durable_watermark_t(), expected);
    acknowledged = expected;
    store.reset();
  }
}

TEST_P(WatermarkStoreTest, SecondOpenOfTheSameDirectoryFailsWhileTheFirstIsOpen) {
  TempDir tmp;
  auto first = open_ok(tmp.path());
  ASSERT_NE(first, nullptr);
  const std::string error = open_error(tmp.path());
  EXPECT_THAT(error, HasSubstr(tmp.sub("watermark")));
  EXPECT_THAT(error, HasSubstr("locked by another process"));
  EXPECT_THAT(error, HasSubstr("--state-dir"));
  store_ok(*first, 10);  // the first one is unaffected
  first.reset();
  auto second = open_ok(tmp.path());
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->durable_watermark_t(), 10u);
}

TEST_P(WatermarkStoreTest, SecondProcessOnTheSameDirectoryFails) {
  TempDir tmp;
  const std::string dir = tmp.path();
  int to_parent[2];
  int to_child[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  ASSERT_EQ(::pipe(to_child), 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the "first flurryd": holds the store until told to exit
    OpenOptions o;
    o.use_io_uring = io_uring();
    std::string error;
    auto store = testing::open_store(dir, default_identity, o, &error);
    const char ready = store != nullptr ? 'y' : 'n';
    if (store == nullptr) std::fprintf(stderr, "child: %s\n", error.c_str());
    char go = 0;
    const bool piped = ::write(to_parent[1], &ready, 1) == 1 && ::read(to_child[0], &go, 1) == 1;
    ::_exit(store != nullptr && piped ? 0 : 1);
  }
  char ready = 0;
  EXPECT_EQ(::read(to_parent[0], &ready, 1), 1);
  EXPECT_EQ(ready, 'y');
  const std::string error = open_error(dir);
  EXPECT_THAT(error, HasSubstr("locked by another process"));
  EXPECT_THAT(error, HasSubstr(dir + "/watermark"));
  const char go = 'g';
  EXPECT_EQ(::write(to_child[1], &go, 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) ::close(fd);
  auto store = open_ok(dir);  // the lock died with the process
  EXPECT_NE(store, nullptr);
}

TEST_P(WatermarkStoreTest, ConcurrentFirstOpensCreateOneFileAndOneWinsTheLock) {
  TempDir tmp;
  const std::string dir = tmp.sub("fresh");
  constexpr int openers = 6;
  std::barrier start(openers);
  std::barrier hold(openers);
  std::atomic<int> opened{0};
  std::atomic<int> locked_out{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < openers; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      std::string error;
      auto store = testing::open_store(dir, default_identity, options(), &error);
      if (store != nullptr) {
        ++opened;
      } else if (error.find("locked by another process") != std::string::npos) {
        ++locked_out;
      } else {
        ADD_FAILURE() << error;
      }
      hold.arrive_and_wait();  // keep every store open until all have tried
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(opened.load(), 1);
  EXPECT_EQ(locked_out.load(), openers - 1);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u) << "no temporary files left behind";
}

// A real write failure without root tricks: RLIMIT_FSIZE makes the kernel refuse writes at or
// beyond the limit (EFBIG), or cut them short when the limit falls inside the slot.
TEST_P(WatermarkStoreTest, FailedStoreKeepsThePreviousWatermarkAndTheStoreUsable) {
  TempDir tmp;
  const std::string dir = tmp.path();
  auto store = open_ok(dir);
  ASSERT_NE(store, nullptr);
  store_ok(*store, 100);  // sequence 1, slot 1 (offset 4096)
  store_ok(*store, 200);  // sequence 2, slot 0; the next store goes to offset 4096

  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  const auto limit_to = [&](rlim_t bytes) {
    struct rlimit limited = saved;
    limited.rlim_cur = bytes;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  };

  std::string error;
  limit_to(4096);
  error = failure(store->store(300));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  EXPECT_THAT(error, HasSubstr(dir + "/watermark"));
  EXPECT_THAT(error, HasSubstr("File too large"));
  EXPECT_THAT(error, HasSubstr("the durable watermark stays 200"));
  EXPECT_EQ(store->durable_watermark_t(), 200u);
  EXPECT_EQ(store->store_failures(), 1u);
  EXPECT_EQ(store->method(), method_name(io_uring()));

  limit_to(4096 + 32);  // half of the slot fits: a short write
  error = failure(store->store(300));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  EXPECT_THAT(error, HasSubstr("short"));
  EXPECT_THAT(error, HasSubstr("32 of 128"));
  EXPECT_EQ(store->durable_watermark_t(), 200u);
  EXPECT_EQ(store->store_failures(), 2u);
  std::signal(SIGXFSZ, old_handler);

  // The torn slot is the one that was being written: a reopen now (a crash) recovers 200.
  {
    store.reset();
    auto reopened = open_ok(dir);
    ASSERT_NE(reopened, nullptr);
    EXPECT_EQ(reopened->durable_watermark_t(), 200u);
    const auto warnings = log_capture.warnings();
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("slot 1 (offset 4096) is corrupt (CRC mismatch"));
    store = std::move(reopened);
  }
  store_ok(*store, 300);
  EXPECT_EQ(store->sequence(), 3u);
  store.reset();
  store = open_ok(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->durable_watermark_t(), 300u);
  EXPECT_TRUE(log_capture.warnings().empty());
}

// The same failure on a store that stays open: after the limit is lifted the very next
// store() succeeds in the same slot.
TEST_P(WatermarkStoreTest, StoreSucceedsAgainAfterAFailure) {
  TempDir tmp;
  auto store = open_ok(tmp.path());
  ASSERT_NE(store, nullptr);
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limited = saved;
  limited.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string error;
  const Status stored_status = store->store(100);  // sequence 1 -> offset 4096
  const bool stored = stored_status.ok();
  error = stored_status.message();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(stored);
  EXPECT_EQ(store->durable_watermark_t(), 0u);
  EXPECT_EQ(store->sequence(), 0u);
  store_ok(*store, 100);
  EXPECT_EQ(store->sequence(), 1u);
  EXPECT_EQ(store->stores(), 1u);
  EXPECT_EQ(store->store_failures(), 1u);
}

TEST_P(WatermarkStoreTest, AStateFileThatIsNotARegularFileIsRefused) {
  TempDir tmp;
  ASSERT_EQ(::symlink("/dev/null", tmp.sub("watermark").c_str()), 0);
  const std::string error = open_error(tmp.path());
  EXPECT_THAT(error, HasSubstr(tmp.sub("watermark")));
  EXPECT_THAT(error, HasSubstr("not a regular file"));
}

TEST_P(WatermarkStoreTest, AStateDirectoryThatIsAFileIsRefused) {
  TempDir tmp;
  testing::write_whole(tmp.sub("file"), {1, 2, 3});
  const std::string error = open_error(tmp.sub("file"));
  EXPECT_THAT(error, HasSubstr(tmp.sub("file")));
  EXPECT_THAT(error, HasSubstr("not a directory"));
  EXPECT_THAT(error, HasSubstr("--state-dir"));
  const std::string below = open_error(tmp.sub("file/state"));
  EXPECT_THAT(below, HasSubstr(tmp.sub("file")));
  EXPECT_THAT(below, HasSubstr("--state-dir"));
}

// ENOSPC, for real, on a 64 KiB tmpfs in a private mount namespace of a child process
// (needs CAP_SYS_ADMIN; skipped otherwise). A full disk must stop the creation of a state
// file with a clear error, and must not stop store() on an existing file: the file is
// written complete at creation, so a store never allocates.
TEST_P(WatermarkStoreTest, FullDiskFailsCreationButNotStoresIntoAnExistingFile) {
  TempDir tmp;
  const std::string mount_point = tmp.sub("mnt");
  std::filesystem::create_directory(mount_point);
  const bool uring = io_uring();
  const int status = testing::run_in_child([&]() -> int {
    if (::unshare(CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=64k,mode=0700") != 0) return 77;
    OpenOptions o;
    o.use_io_uring = uring;
    std::string error;
    auto existing = testing::open_store(mount_point + "/existing", default_identity, o, &error);
    if (existing == nullptr) {
      std::fprintf(stderr, "child: open before filling: %s\n", error.c_str());
      return 1;
    }
    // Fill the file system.
    const int filler = ::open((mount_point + "/filler").c_str(), O_WRONLY | O_CREAT, 0600);
    std::vector<char> chunk(4096, 'x');
    while (::write(filler, chunk.data(), chunk.size()) > 0) {
    }
    const int fill_errno = errno;
    ::close(filler);
    if (fill_errno != ENOSPC) {
      std::fprintf(stderr, "child: filling ended with %s\n", std::strerror(fill_errno));
      return 1;
    }
    const std::string fresh = mount_point + "/fresh";
    auto store = testing::open_store(fresh, default_identity, o, &error);
    if (store != nullptr || error.find("No space left on device") == std::string::npos ||
        error.find(fresh + "/watermark") == std::string::npos) {
      std::fprintf(stderr, "child: expected ENOSPC naming the file, got: %s\n", error.c_str());
      return 1;
    }
    if (const Status stored = existing->store(42); !stored.ok()) {
      error = stored.message();
      std::fprintf(stderr, "child: store on the full disk: %s\n", error.c_str());
      return 1;
    }
    return 0;
  });
  if (status == 77) GTEST_SKIP() << "cannot mount a tmpfs in a private mount namespace here";
  EXPECT_EQ(status, 0) << "see the child's stderr above";
}

// io_uring_setup refused by a seccomp filter in a child process: open() falls back to
// pwrite+fdatasync with exactly one warning, and stores still work.
TEST(WatermarkStoreFallback, IoUringUnavailableFallsBackWithOneWarning) {
  TempDir tmp;
  const std::string dir = tmp.path();
  const int status = testing::run_in_child([&]() -> int {
    log_capture.warnings();  // what the parent logged before the fork is not the child's
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {static_cast<unsigned short>(std::size(filter)), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 77;
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) return 77;
    OpenOptions o;
    o.use_io_uring = true;
    std::string error;
    auto store = testing::open_store(dir, default_identity, o, &error);
    if (store == nullptr) {
      std::fprintf(stderr, "child: %s\n", error.c_str());
      return 1;
    }
    const auto warnings = log_capture.warnings();
    if (store->method() != "pwrite+fdatasync" || warnings.size() != 1 ||
        warnings[0] != "io_uring unavailable (Function not implemented); using pwrite+fdatasync") {
      std::fprintf(stderr, "child: method %s, warnings: %s\n", std::string(store->method()).c_str(),
                   join(warnings).c_str());
      return 1;
    }
    if (const Status stored = store->store(77); !stored.ok()) {
      error = stored.message();
      std::fprintf(stderr, "child: %s\n", error.c_str());
      return 1;
    }
    return 0;
  });
  if (status == 77) GTEST_SKIP() << "seccomp unavailable here";
  ASSERT_EQ(status, 0) << "see the child's stderr above";
  std::string error;
  auto store = testing::open_store(dir, default_identity, OpenOptions{}, &error);
  ASSERT_NE(store, nullptr) << error;
  EXPECT_EQ(store->durable_watermark_t(), 77u);
}

}  // namespace
}  // namespace flurry::persist
