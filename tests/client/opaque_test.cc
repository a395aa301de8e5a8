// tests/client/opaque_test.cc — the opaque form (client/forms.h OpaqueKey) and its key file
// (client/form_keys.h): decrypt(encrypt(x)) == x, avalanche between consecutive IDs, keys that
// differ give different outputs, a known answer that pins the construction, the opaque string,
// and every refusal of the key file (mode, malformed TOML, bad ids and secrets).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "client/form_keys.h"
#include "client/forms.h"

namespace flurry::client::forms {
namespace {

constexpr std::uint64_t seed = 20261126;

std::array<std::uint8_t, opaque_secret_size> counting_secret(std::uint8_t first = 0) {
  std::array<std::uint8_t, opaque_secret_size> secret{};
  for (std::size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<std::uint8_t>(first + i);
  return secret;
}

OpaqueKey make_key(std::string_view id = "k1", std::uint8_t first = 0) {
  return *OpaqueKey::create(id, counting_secret(first));
}

TEST(Opaque, DecryptInvertsEncryptOnEdgesAndRandomValues) {
  const OpaqueKey key = make_key();
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> values{
      0, 1, 2, id_max, id_max - 1, std::uint64_t{1} << 32, (std::uint64_t{1} << 32) - 1};
  for (int i = 0; i < 200'000; ++i) values.push_back(rng() >> 1);
  for (std::uint64_t x : values) {
    const std::uint64_t y = key.encrypt(x);
    ASSERT_LE(y, id_max) << "seed " << seed << " x " << x;
    ASSERT_EQ(key.decrypt(y), x) << "seed " << seed << " x " << x;
  }
  EXPECT_NE(key.encrypt(0), 0U);
  EXPECT_NE(key.encrypt(1), 1U);
}

TEST(Opaque, ConsecutiveIdsDifferInAboutHalfTheBits) {
  const OpaqueKey key = make_key();
  std::mt19937_64 rng(seed + 1);
  constexpr int samples = 20'000;
  double total = 0;
  int small = 0;
  for (int i = 0; i < samples; ++i) {
    const std::uint64_t x = (rng() >> 1) & ~std::uint64_t{1};
    const int differing = std::popcount(key.encrypt(x) ^ key.encrypt(x + 1));
    total += differing;
    if (differing < 10) ++small;
  }
  const double mean = total / samples;
  EXPECT_GT(mean, 30.5) << "seed " << seed + 1;  // 63 / 2 = 31.5 for a random permutation
  EXPECT_LT(mean, 32.5);
  EXPECT_LT(small, samples / 1000);  // P(binomial(63, 1/2) < 10) ~ 1e-8
  // Bits of the output are balanced over sequential inputs (each bit set about half the time).
  std::array<int, 63> ones{};
  for (std::uint64_t x = 0; x < 20'000; ++x) {
    const std::uint64_t y = key.encrypt(x);
    for (unsigned bit = 0; bit < 63; ++bit) ones[bit] += static_cast<int>((y >> bit) & 1);
  }
  for (unsigned bit = 0; bit < 63; ++bit) EXPECT_NEAR(ones[bit], 10'000, 500) << "bit " << bit;
}

TEST(Opaque, DifferentKeysGiveDifferentOutputs) {
  const OpaqueKey a = make_key("a", 0);
  const OpaqueKey b = make_key("b", 1);
  std::array<std::uint8_t, opaque_secret_size> one_bit = counting_secret(0);
  one_bit[15] ^= 0x80;
  const OpaqueKey c = *OpaqueKey::create("c", one_bit);
  int same = 0;
  for (std::uint64_t x = 0; x < 10'000; ++x) {
    same += a.encrypt(x) == b.encrypt(x);
    same += a.encrypt(x) == c.encrypt(x);
  }
  EXPECT_EQ(same, 0);
}

// Pins the construction (forms.h, docs/forms.md): a change of rounds, halves, message
// layout or round function changes these numbers and fails here before it reaches users.
TEST(Opaque, KnownAnswers) {
  const OpaqueKey key = make_key("k1");
  EXPECT_EQ(key.encrypt(0), opaque_known_answer_of_0);
  EXPECT_EQ(key.encrypt(1), opaque_known_answer_of_1);
  EXPECT_EQ(key.encrypt(4194324487ULL), opaque_known_answer_of_known_id);
  std::array<char, text_size_max> buffer{};
  const Result<std::size_t> n = key.format(4194324487ULL, buffer);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buffer.data(), *n), opaque_known_text_of_known_id);
}

TEST(Opaque, StringCarriesTheKeyIdAndRoundTrips) {
  const OpaqueKey key = make_key("k7");
  std::array<char, text_size_max> buffer{};
  std::mt19937_64 rng(seed + 2);
  for (int i = 0; i < 10'000; ++i) {
    const std::uint64_t id = rng() >> 1;
    const Result<std::size_t> n = key.format(id, buffer);
    ASSERT_TRUE(n.ok());
    const std::string text(buffer.data(), *n);
    ASSERT_EQ(text.size(), 2 + 1 + base32_size);
    ASSERT_EQ(text.substr(0, 3), "k7_");
    ASSERT_EQ(*parse_opaque(key, text), id) << text;
  }
  const std::string text(buffer.data(), 16);
  std::string upper = text;
  upper[0] = 'K';
  EXPECT_TRUE(parse_opaque(key, upper).ok()) << "key ids match ignoring case";
  EXPECT_NE(parse_opaque(make_key("k8"), text).message().find("made with key 'k7', not 'k8'"),
            std::string::npos);
  EXPECT_NE(parse_opaque(key, "k7_123").message().find("not an opaque ID"), std::string::npos);
  EXPECT_NE(parse_opaque(key, "k7-0000000000000").message().find("not an opaque ID"), std::string::npos);
  EXPECT_NE(parse_opaque(key, "_0000000000000").message().find("not an opaque ID"), std::string::npos);
  EXPECT_NE(parse_opaque(key, "k7_000000000000U").message().find("'U' at position 13"), std::string::npos);
  EXPECT_NE(parse_opaque(key, "k7_8000000000000").message().find("2^63"), std::string::npos);
  EXPECT_NE(parse_opaque(key, "k.7_0000000000000").message().find("not an opaque ID"), std::string::npos);
}

TEST(Opaque, KeysAreRefusedWhenMalformed) {
  EXPECT_NE(OpaqueKey::create("", counting_secret()).message().find("1 to 8 chars"), std::string::npos);
  EXPECT_FALSE(OpaqueKey::create("toolongid", counting_secret()).ok());
  EXPECT_FALSE(OpaqueKey::create("K1", counting_secret()).ok());
  EXPECT_FALSE(OpaqueKey::create("k-1", counting_secret()).ok());
  const std::array<std::uint8_t, opaque_secret_size> zero{};
  EXPECT_NE(OpaqueKey::create("k1", zero).message().find("all zero"), std::string::npos);
}

// ---- key files ----

class KeyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/flurry_keys_test_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::remove(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  // Writes `text` to the test's key file with `mode`; returns its path.
  const std::string& write(const std::string& text, mode_t mode = 0600) {
    path_ = dir_ + "/keys.toml";
    std::ofstream(path_) << text;
    EXPECT_EQ(::chmod(path_.c_str(), mode), 0);
    return path_;
  }
  std::string load_error(const std::string& text, mode_t mode = 0600) {
    const Result<KeyRing> ring = KeyRing::load(write(text, mode));
    return ring.ok() ? "loaded" : ring.message();
  }

  std::string dir_;
  std::string path_;
};

constexpr const char* two_keys =
    "current = \"k2\"\n"
    "[[key]]\nid = \"k1\"\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n"
    "[[key]]\nid = \"k2\"\nsecret = \"0F0E0D0C0B0A09080706050403020100\"\n";

TEST_F(KeyFile, CurrentKeyEncodesAndEveryKeyDecodes) {
  const Result<KeyRing> ring = KeyRing::load(write(two_keys));
  ASSERT_TRUE(ring.ok()) << ring.message();
  EXPECT_EQ(ring->size(), 2U);
  EXPECT_EQ(ring->current().id(), "k2");
  std::array<char, text_size_max> buffer{};
  const OpaqueKey old_key = make_key("k1");  // the same secret as k1 in the file
  Result<std::size_t> n = old_key.format(12345, buffer);
  EXPECT_EQ(*ring->decode({buffer.data(), *n}), 12345U);
  n = ring->current().format(67890, buffer);
  EXPECT_EQ(buffer[1], '2');
  EXPECT_EQ(*ring->decode({buffer.data(), *n}), 67890U);
  EXPECT_NE(ring->decode("k3_0000000000000").message().find("names key 'k3', which the key file lacks"),
            std::string::npos);
  EXPECT_TRUE(KeyRing::load(write(two_keys, 0400)).ok()) << "0400 is stricter than 0600";
}

TEST_F(KeyFile, RefusedWhenGroupOrOthersMayReadOrWrite) {
  for (mode_t mode : {0640, 0604, 0644, 0660, 0602, 0620, 0610}) {
    const std::string message = load_error(two_keys, mode);
    EXPECT_NE(message.find("must be mode 0600 or stricter"), std::string::npos)
        << std::oct << mode << ": " << message;
    EXPECT_NE(message.find("chmod 600 " + path_), std::string::npos) << message;
  }
  EXPECT_NE(load_error(two_keys, 0644).find("has mode 0644"), std::string::npos);
  EXPECT_NE(KeyRing::load(dir_ + "/absent.toml").message().find("No such file"), std::string::npos);
  EXPECT_NE(KeyRing::load(dir_).message().find("not a regular file"), std::string::npos);
}

TEST_F(KeyFile, MalformedFilesAreRefusedSayingWhy) {
  const std::string k1 = "[[key]]\nid = \"k1\"\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n";
  EXPECT_EQ(load_error(k1), "loaded");
  EXPECT_NE(load_error("[[key]\n").find("not TOML"), std::string::npos);
  EXPECT_NE(load_error("").find("no key"), std::string::npos);
  EXPECT_NE(load_error("keys = 1\n" + k1).find("unknown setting 'keys'"), std::string::npos);
  EXPECT_NE(load_error("[[key]]\nid = \"k1\"\n").find("needs both id"), std::string::npos);
  EXPECT_NE(load_error("[[key]]\nid = \"k1\"\nsecret = \"0001\"\n").find("32 hex digits"), std::string::npos);
  EXPECT_NE(load_error("[[key]]\nid = \"k1\"\nsecret = \"zz0102030405060708090a0b0c0d0e0f\"\n")
                .find("32 hex digits"),
            std::string::npos);
  EXPECT_NE(load_error("[[key]]\nid = \"k1\"\nsecret = 5\n").find("needs both id"), std::string::npos);
  EXPECT_NE(
      load_error("[[key]]\nid = \"k1\"\nsecret = \"00000000000000000000000000000000\"\n").find("all zero"),
      std::string::npos);
  EXPECT_NE(load_error("[[key]]\nid = \"K_1\"\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n")
                .find("a-z and 0-9"),
            std::string::npos);
  EXPECT_NE(load_error(k1 + "extra = 1\n").find("unknown setting 'extra'"), std::string::npos);
  EXPECT_NE(load_error(k1 + k1).find("appears twice"), std::string::npos);
  EXPECT_NE(load_error("key = \"k1\"\n").find("must be [[key]] tables"), std::string::npos);
  EXPECT_NE(load_error("current = 1\n" + k1).find("current a string"), std::string::npos);
  const std::string k2 = "[[key]]\nid = \"k2\"\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n";
  EXPECT_NE(load_error(k1 + k2).find("2 keys and no current"), std::string::npos);
  EXPECT_NE(load_error("current = \"k9\"\n" + k1 + k2).find("names no key"), std::string::npos);
  EXPECT_NE(load_error(std::string(key_file_size_max + 1, '#')).find("larger than"), std::string::npos);
}

}  // namespace
}  // namespace flurry::client::forms
