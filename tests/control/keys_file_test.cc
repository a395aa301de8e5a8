// tests/control/keys_file_test.cc — control/keys_file: the key file's mode, every field's
// check with an error naming the key and the field, stable counter slots across reloads,
// and `keys list` without secrets.
#include "control/keys_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include "tests/support/temp_dir.h"

namespace flurry::control {
namespace {

constexpr const char* good_key =
    "[[key]]\nname = \"billing\"\nid = 7\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n"
    "opcodes = [\"get_ids\", \"get_seq\"]\nsequences = [\"orders\"]\nbatch_max = 500\nseq_batch_max = "
    "250\nrate_per_s = 20\n"
    "answer_bytes_max = 1000\n";

class KeysFileTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text, mode_t mode = 0600) {
    const std::string path = dir_.sub("keys.toml");
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string error_of(const std::string& text) {
    Result<std::unique_ptr<core::KeyTable>> table = load_key_file(write(text), slots_);
    return table.ok() ? std::string("ok") : table.message();
  }
  testing::TempDir dir_;
  KeySlots slots_;
};

TEST_F(KeysFileTest, ReadsEveryField) {
  Result<std::unique_ptr<core::KeyTable>> table = load_key_file(write(good_key), slots_);
  ASSERT_TRUE(table.ok()) << table.message();
  const core::Key* key = (*table)->find(7);
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(key->name, "billing");
  EXPECT_EQ(key->secret[15], 0x0f);
  EXPECT_TRUE(key->allows_opcode(proto::Opcode::get_ids));
  EXPECT_FALSE(key->allows_opcode(proto::Opcode::info));
  EXPECT_TRUE(key->allows_sequence("orders"));
  EXPECT_FALSE(key->allows_sequence("invoices"));
  EXPECT_EQ(key->batch_max, 500u);
  EXPECT_EQ(key->seq_batch_max, 250u) << "GET_SEQ's own bound, apart from batch_max (GET_IDS)";
  EXPECT_EQ(key->rate_per_s, 20u);
  EXPECT_EQ(key->answer_bytes_max, 1000u);
  const std::string listed = keys_json(table->get()).dump();
  EXPECT_EQ(listed.find("000102"), std::string::npos) << "keys list printed a secret: " << listed;
  EXPECT_NE(listed.find("get_seq"), std::string::npos) << listed;
}

TEST_F(KeysFileTest, ModeReadableByOthersIsRefused) {
  for (mode_t mode : {0644, 0640, 0604, 0660}) {
    Result<std::unique_ptr<core::KeyTable>> table = load_key_file(write(good_key, mode), slots_);
    ASSERT_FALSE(table.ok()) << std::oct << mode;
    EXPECT_NE(table.message().find("chmod 600"), std::string::npos) << table.message();
  }
  EXPECT_TRUE(load_key_file(write(good_key, 0400), slots_).ok());
}

TEST_F(KeysFileTest, BadFieldsAreNamed) {
  const std::string base = "[[key]]\nname = \"a\"\nid = 1\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n";
  EXPECT_NE(error_of(base + "opcodes = [\"ping\"]\n").find("opcodes"), std::string::npos);
  EXPECT_NE(error_of(base + "batch_max = 0\n").find("batch_max"), std::string::npos);
  EXPECT_NE(error_of(base + "seq_batch_max = 0\n").find("seq_batch_max"), std::string::npos);
  EXPECT_NE(error_of(base + "answer_bytes_max = 2000\n").find("answer_bytes_max"), std::string::npos);
  EXPECT_NE(error_of("[[key]]\nname = \"a\"\nid = 1\nsecret = \"0001\"\n").find("secret"), std::string::npos);
  EXPECT_NE(error_of("[[key]]\nname = \"a b\"\nid = 1\n").find("name"), std::string::npos);
  EXPECT_NE(
      error_of("[[key]]\nname = \"a\"\nid = 0\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n").find("id"),
      std::string::npos);
  EXPECT_NE(error_of(base + base).find("repeats"), std::string::npos);
  EXPECT_NE(error_of("x = 1\n").find("no [[key]]"), std::string::npos);
  EXPECT_NE(error_of("[[key\n").find("line"), std::string::npos);
  EXPECT_EQ(error_of(base), "ok");
  // Neither bound given: both default to count_max, each on its own.
  Result<std::unique_ptr<core::KeyTable>> table = load_key_file(write(base + "batch_max = 9\n"), slots_);
  ASSERT_TRUE(table.ok()) << table.message();
  EXPECT_EQ((*table)->find(1)->batch_max, 9u);
  EXPECT_EQ((*table)->find(1)->seq_batch_max, proto::count_max);
}

TEST_F(KeysFileTest, SlotsAreStableAcrossReloads) {
  const std::string a = "[[key]]\nname = \"a\"\nid = 10\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n";
  const std::string b = "[[key]]\nname = \"b\"\nid = 20\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n";
  auto first = load_key_file(write(a), slots_);
  auto second = load_key_file(write(b + a), slots_);
  auto third = load_key_file(write(b), slots_);
  ASSERT_TRUE(first.ok() && second.ok() && third.ok());
  EXPECT_EQ((*first)->find(10)->slot, (*second)->find(10)->slot);
  EXPECT_EQ((*second)->find(20)->slot, (*third)->find(20)->slot);
  EXPECT_NE((*second)->find(10)->slot, (*second)->find(20)->slot);
  EXPECT_EQ(slots_.used(), 1u);  // key 10 left with the third file
}

std::string key_text(std::uint32_t id) {
  return "[[key]]\nname = \"k" + std::to_string(id) + "\"\nid = " + std::to_string(id) +
         "\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n";
}

// Rotation without a limit: 300 keys one after another, each a reload that drops the key
// before; a removed key's slot goes to a new id only after release_retired() (no worker holds
// the old table any more), and under a new generation.
TEST_F(KeysFileTest, SlotsOfRemovedKeysAreRecycledUnderNewGenerationsOnlyOnceReleased) {
  std::map<std::uint32_t, std::uint64_t> generation_of_slot;
  std::set<std::uint64_t> generations;
  for (std::uint32_t id = 1; id <= 300; ++id) {
    if (id % 2 == 0) slots_.release_retired();  // every other reload: the old tables are gone
    Result<std::unique_ptr<core::KeyTable>> table = load_key_file(write(key_text(id)), slots_);
    ASSERT_TRUE(table.ok()) << "key " << id << ": " << table.message();
    const core::Key& key = (*table)->keys()[0];
    ASSERT_LT(key.slot, core::key_slots_max);
    EXPECT_TRUE(generations.insert(key.generation).second) << "generation reused";
    generation_of_slot[key.slot] = key.generation;
    EXPECT_EQ(slots_.used(), 1u);
  }
  EXPECT_EQ(generation_of_slot.size(), core::key_slots_max) << "every slot was used, then recycled";
}

TEST_F(KeysFileTest, AFreedSlotWaitsUntilReleasedWhenEveryOtherSlotIsHeld) {
  std::string all;
  for (std::uint32_t id = 1; id <= core::key_slots_max; ++id) all += key_text(id);
  ASSERT_TRUE(load_key_file(write(all), slots_).ok());
  // Key 1 out, key 1000 in, in one reload: key 1's slot may still be in a worker's hands.
  std::string rotated;
  for (std::uint32_t id = 2; id <= core::key_slots_max; ++id) rotated += key_text(id);
  const std::string with_new = rotated + key_text(1000);
  Result<std::unique_ptr<core::KeyTable>> refused = load_key_file(write(with_new), slots_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("reload again in a moment"), std::string::npos) << refused.message();
  // Dropping key 1 alone frees its slot; released, it goes to key 1000.
  ASSERT_TRUE(load_key_file(write(rotated), slots_).ok());
  slots_.release_retired();
  Result<std::unique_ptr<core::KeyTable>> table = load_key_file(write(with_new), slots_);
  ASSERT_TRUE(table.ok()) << table.message();
  EXPECT_EQ((*table)->find(1000)->slot, 0u);
}

TEST_F(KeysFileTest, ASymlinkOrAFileOfAnotherUserIsRefused) {
  const std::string real = write(good_key);
  const std::string link = dir_.sub("link.toml");
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  Result<std::unique_ptr<core::KeyTable>> through_link = load_key_file(link, slots_);
  ASSERT_FALSE(through_link.ok());
  EXPECT_NE(through_link.message().find("symlink"), std::string::npos) << through_link.message();
  if (::geteuid() != 0) GTEST_SKIP() << "chown needs root";
  ASSERT_EQ(::chown(real.c_str(), 65534, 65534), 0);
  Result<std::unique_ptr<core::KeyTable>> foreign = load_key_file(real, slots_);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.message().find("belongs to uid 65534"), std::string::npos) << foreign.message();
}

// The door password (RESP AUTH, HTTP bearer token): hashed by hash_door_password, verified by
// verify_door_password, taken by the key file only as a bounded argon2id hash.
TEST_F(KeysFileTest, DoorPasswordHashIsMadeCheckedAndVerified) {
  Result<std::string> hash = hash_door_password("correct-horse-battery");
  ASSERT_TRUE(hash.ok()) << hash.message();
  EXPECT_TRUE(hash->starts_with("$argon2id$v=19$m=1024,t=2,p=1$")) << *hash;
  EXPECT_EQ(hash->find("correct-horse"), std::string::npos) << "the password is in its hash";
  EXPECT_TRUE(check_door_password_hash(*hash).ok());
  EXPECT_TRUE(verify_door_password(*hash, "correct-horse-battery"));
  EXPECT_FALSE(verify_door_password(*hash, "correct-horse-batterY"));
  EXPECT_FALSE(verify_door_password(*hash, ""));
  EXPECT_FALSE(verify_door_password("", "correct-horse-battery")) << "no hash: no login";
  Result<std::string> again = hash_door_password("correct-horse-battery");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*again, *hash) << "each hash has its own salt";

  // Too short, too long, a space or a control character: refused, saying what a password is.
  EXPECT_NE(hash_door_password("short").message().find("16 to 256"), std::string::npos);
  EXPECT_FALSE(hash_door_password(std::string(257, 'x')).ok());
  EXPECT_NE(hash_door_password("has a space in the middle").message().find("without spaces"),
            std::string::npos);
  EXPECT_FALSE(hash_door_password(std::string("tab\there-and-more-text")).ok());

  // In the key file: read, listed as present (never the hash), and its tag set.
  const std::string base = "[[key]]\nname = \"a\"\nid = 1\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n";
  Result<std::unique_ptr<core::KeyTable>> table =
      load_key_file(write(base + "door_password_hash = \"" + *hash + "\"\n"), slots_);
  ASSERT_TRUE(table.ok()) << table.message();
  EXPECT_EQ((*table)->find(1)->door_password_hash, *hash);
  EXPECT_NE((*table)->find(1)->door_tag, 0u);
  EXPECT_EQ((*table)->find_name("a"), (*table)->find(1));
  EXPECT_EQ((*table)->find_name("b"), nullptr);
  const std::string listed = keys_json(table->get()).dump();
  EXPECT_NE(listed.find("\"door_password\":true"), std::string::npos) << listed;
  EXPECT_EQ(listed.find("argon2"), std::string::npos) << "keys list printed a hash: " << listed;
  Result<std::unique_ptr<core::KeyTable>> without = load_key_file(write(base), slots_);
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE((*without)->find(1)->door_password_hash.empty());
  EXPECT_EQ((*without)->find(1)->door_tag, 0u);

  // Not a hash, another algorithm, a cost above the door's bound, or cut short: refused,
  // naming the field and how to make one.
  for (const std::string& bad :
       {std::string("hunter2-but-longer"), std::string("$argon2i$v=19$m=1024,t=2,p=1$c2FsdA$aGFzaA"),
        std::string("$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA"),
        std::string("$argon2id$v=19$m=1024,t=9,p=1$c2FsdA$aGFzaA"),
        std::string("$argon2id$v=19$m=1024,t=2,p=4$c2FsdA$aGFzaA"), std::string("$argon2id$v=19$m=1024,t=2"),
        std::string("$argon2id$v=19$m=1024,t=2,p=1$c2FsdA")}) {
    const std::string error = error_of(base + "door_password_hash = \"" + bad + "\"\n");
    EXPECT_NE(error.find("door_password_hash"), std::string::npos) << bad << ": " << error;
    EXPECT_NE(error.find("flurryctl keys hash-password"), std::string::npos) << error;
  }
  EXPECT_NE(error_of(base + "door_password_hash = 5\n").find("door_password_hash"), std::string::npos);
}

}  // namespace
}  // namespace flurry::control
