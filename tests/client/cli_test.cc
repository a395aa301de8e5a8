// tests/client/cli_test.cc — runs the built `flurry` binary (path in $FLURRY_CLI): decode of a
// known ID, usage errors exit 2 naming the flag, network failures exit 1 naming the server,
// and get / ping / decode --server against the in-process test server.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "client/forms.h"
#include "proto/layout.h"
#include "tests/client/test_server.h"

namespace flurry::client {
namespace {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs `flurry ARGS` through the shell; stdout and stderr are captured separately.
CliResult run(const std::string& args) {
  const char* cli = std::getenv("FLURRY_CLI");
  EXPECT_NE(cli, nullptr) << "FLURRY_CLI is not set (meson sets it)";
  if (cli == nullptr) return {};
  char err_path[] = "/tmp/flurry_cli_test_XXXXXX";
  const int fd = ::mkstemp(err_path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  const std::string command = std::string(cli) + " " + args + " 2>" + err_path;
  CliResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err_file(err_path);
  std::stringstream err;
  err << err_file.rdbuf();
  result.err = err.str();
  std::remove(err_path);
  return result;
}

// The opaque string of known_id with key k1 = 000102...0f (client/forms.h, docs/forms.md).
constexpr std::string_view forms_known_opaque = forms::opaque_known_text_of_known_id;

// time 1000 ms after the epoch, node 5, counter 7 in the default (snowflake) layout.
constexpr std::uint64_t known_id = (std::uint64_t{1000} << 22) | (5U << 12) | 7U;
static_assert(known_id == 4194324487ULL);

TEST(Cli, DecodeKnownId) {
  const CliResult r = run(std::to_string(known_id).insert(0, "decode "));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("2024-01-01T00:00:01.000Z"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("raw 1000 x 1 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("node     5\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("core     0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("counter  7\n"), std::string::npos) << r.out;
}

TEST(Cli, DecodeKnownIdAsJsonFromHex) {
  const CliResult r = run("decode 0xfa005007 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(
      r.out,
      "{\"id\":4194324487,\"id_hex\":\"0x00000000fa005007\",\"time\":\"2024-01-01T00:00:"
      "01.000Z\",\"unix_ms\":1704067201000,\"time_raw\":1000,\"time_unit_ms\":1,"
      "\"epoch_ms\":1704067200000,\"node\":5,\"core\":0,\"counter\":7,\"layout\":\"41/10/"
      "12\",\"core_bits\":0,\"core_from\":\"sequence\",\"form\":\"hex\",\"tag\":\"\",\"key_id\":\"\"}\n");
}

TEST(Cli, DecodeWithCoreBitsAndEpoch) {
  proto::Layout layout;
  layout.core_bits = 2;
  layout.epoch_ms = 1'600'000'000'000ULL;
  const std::uint64_t id = layout.compose(2500, 9, 3, 17);
  const CliResult r = run("decode " + std::to_string(id) + " --core-bits 2 --epoch 1600000000000 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"node\":9,\"core\":3,\"counter\":17"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"time\":\"2020-09-13T12:26:42.500Z\""), std::string::npos) << r.out;
}

TEST(Cli, BadFlagsExit2NamingTheFlag) {
  CliResult r = run("get --bogus");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
  r = run("get --format xml");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--format"), std::string::npos) << r.err;
  r = run("get -n 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--count"), std::string::npos) << r.err;
  r = run("get --server nonsense");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--server"), std::string::npos) << r.err;
  r = run("decode 1 --layout 10/10");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--layout"), std::string::npos) << r.err;
  r = run("decode 1 --epoch yesterday");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--epoch"), std::string::npos) << r.err;
  r = run("decode 1 --core-from elsewhere");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--core-from"), std::string::npos) << r.err;
  r = run("decode 1 --layout js-safe --server 127.0.0.1:7420");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--server"), std::string::npos) << r.err;
  r = run("decode banana");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("banana"), std::string::npos) << r.err;
  r = run("decode 0x7fffffffffffffff --layout js-safe");  // above js-safe's 53 bits
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("53 bits"), std::string::npos) << r.err;
  r = run("");
  EXPECT_EQ(r.status, 2);
  r = run("ping -c 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--count"), std::string::npos) << r.err;
}

TEST(Cli, HelpExits0) {
  const CliResult r = run("get --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--format"), std::string::npos) << r.out;
}

TEST(Cli, NoServerExits1NamingServerAndFix) {
  testing::DeadServer dead;
  const CliResult r = run("get -n 3 --timeout-ms 20 --attempts 2 --server " + dead.address());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "flurry get: no answer from " + dead.address() +
                       " after 2 attempts of 20 ms: is flurryd running? start it with "
                       "scripts/run\n");
  EXPECT_TRUE(r.out.empty());
}

// flurry get --key-file against a server with --auth required: signed, served; without the
// key refused naming auth_required; a key file others may read is refused naming the fix.
TEST(Cli, GetWithKeyFile) {
  testing::ServerConfig config;
  config.auth = true;
  testing::TestServer server(config);
  char dir[] = "/tmp/flurry_cli_key_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string key = std::string(dir) + "/client.key";
  {
    std::ofstream file(key);
    file << "id = 7\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n";
  }
  ::chmod(key.c_str(), 0600);
  CliResult r = run("get -n 4 --key-file " + key + " --timeout-ms 5000 --server " + server.address());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4) << r.out;
  r = run("get -n 1 --timeout-ms 5000 --server " + server.address());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("auth_required"), std::string::npos) << r.err;
  ::chmod(key.c_str(), 0644);
  r = run("get -n 1 --key-file " + key + " --server " + server.address());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
  std::remove(key.c_str());
  ::rmdir(dir);
}

TEST(Cli, GetPingAndDecodeAgainstAServer) {
  testing::ServerConfig config;
  config.node_id = 12;
  testing::TestServer server(config);
  CliResult r = run("get -n 5 --timeout-ms 5000 --server " + server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::unordered_set<std::uint64_t> ids;
  std::string line;
  std::uint64_t last = 0;
  while (std::getline(lines, line)) {
    last = std::stoull(line);
    ids.insert(last);
  }
  EXPECT_EQ(ids.size(), 5U) << r.out;

  // A dead first server; the live one answers within an attempt however loaded the machine.
  r = run("get -n 3 --format json --server 127.0.0.1:1 --timeout-ms 1000 --server " + server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.front(), '[');
  EXPECT_EQ(r.out.substr(r.out.size() - 2), "]\n");
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), ','), 2);

  r = run("get -n 2 --format hex --timeout-ms 5000 --server " + server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.size(), 2 * std::string("0x0000000000000000\n").size()) << r.out;

  r = run("decode " + std::to_string(last) + " --json --timeout-ms 5000 --server " + server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"node\":12,"), std::string::npos) << r.out;

  // Each ping is one attempt: a generous one, so a loaded machine loses none.
  r = run("ping -c 2 --interval-ms 1 --timeout-ms 5000 --server " + server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("node 12: seq=2 rtt="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 sent, 2 answered, 0% lost"), std::string::npos) << r.out;
}

// ---- ID forms ----

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Cli, DecodeReadsEveryFormOfTheKnownId) {
  for (const char* value : {"4194324487", "0xfa005007", "0000003X00M07", "0000003x00m07", "oooooo3XOOM07",
                            "2401010000010000020487", "240101000001000ORD0020487"}) {
    const CliResult r = run(std::string("decode ") + value);
    ASSERT_EQ(r.status, 0) << value << ": " << r.err;
    EXPECT_NE(r.out.find("id       4194324487 (0x00000000fa005007)\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("counter  7\n"), std::string::npos) << r.out;
  }
  CliResult r = run("decode 240101000001000ORD0020487 --json");
  EXPECT_NE(r.out.find("\"form\":\"readable\",\"tag\":\"ORD\""), std::string::npos) << r.out;
  r = run("decode 0000003X00M07");
  EXPECT_NE(r.out.find("form     base32\n"), std::string::npos) << r.out;
  r = run("decode 240101000001000ORD0020487");
  EXPECT_NE(r.out.find("form     readable, tag ORD\n"), std::string::npos) << r.out;
  // js-safe: the readable form follows the layout (10 ms: two fraction digits).
  r = run("decode 24010100020345T06153 --layout js-safe --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"time\":\"2024-01-01T00:02:03.450Z\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"node\":3,\"core\":0,\"counter\":9"), std::string::npos) << r.out;
}

TEST(Cli, DecodeRefusesAmbiguousAndMalformedValues) {
  CliResult r = run("decode 1234567890123");  // 13 digits: dec and base32
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("reads as dec (1234567890123) and as base32"), std::string::npos) << r.err;
  r = run("decode 1234567890123 --form base32");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("form     base32\n"), std::string::npos) << r.out;
  r = run("decode 0000003U00M07");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("'U' at position 8"), std::string::npos) << r.err;
  r = run("decode 241301000001000ORD0020487");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a real UTC date"), std::string::npos) << r.err;
  r = run("decode k1_0000000000000");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("needs a key file: pass --form-key-file"), std::string::npos) << r.err;
  r = run("decode 4194324487 --form readable");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a readable ID"), std::string::npos) << r.err;
  r = run("decode 1 --form roman");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--form"), std::string::npos) << r.err;
}

// A key file in a fresh directory, removed with it.
class CliKeyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/flurry_cli_keys_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    path_ = std::string(dir) + "/keys.toml";
    std::ofstream(path_) << "current = \"k2\"\n"
                            "[[key]]\nid = \"k1\"\nsecret = \"000102030405060708090a0b0c0d0e0f\"\n"
                            "[[key]]\nid = \"k2\"\nsecret = \"f0e0d0c0b0a090807060504030201000\"\n";
    ASSERT_EQ(::chmod(path_.c_str(), 0600), 0);
  }
  void TearDown() override {
    std::remove(path_.c_str());
    ::rmdir(path_.substr(0, path_.rfind('/')).c_str());
  }
  std::string path_;
};

TEST_F(CliKeyFile, GetOpaqueAndDecodeItBack) {
  testing::ServerConfig config;
  config.node_id = 12;
  testing::TestServer server(config);
  CliResult r = run("get -n 20 --form opaque --form-key-file " + path_ + " --timeout-ms 5000 --server " +
                    server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 20U) << r.out;
  for (const std::string& line : lines) {
    ASSERT_EQ(line.size(), 16U) << line;
    EXPECT_EQ(line.substr(0, 3), "k2_") << line;
    r = run("decode " + line + " --json --form-key-file " + path_ + " --timeout-ms 5000 --server " +
            server.address());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("\"node\":12,"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"form\":\"opaque\",\"tag\":\"\",\"key_id\":\"k2\""), std::string::npos) << r.out;
  }
  // The known answer of docs/forms.md (key k1 = 000102...0f) through the CLI.
  r = run(std::string("decode ") + std::string(forms_known_opaque) + " --form-key-file " + path_);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("id       4194324487 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("form     opaque, key k1\n"), std::string::npos) << r.out;
}

TEST_F(CliKeyFile, KeyFileReadableByOthersIsRefused) {
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  CliResult r = run("get --form opaque --form-key-file " + path_ + " --server 127.0.0.1:1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("must be mode 0600 or stricter (chmod 600 " + path_ + ")"), std::string::npos)
      << r.err;
  r = run("decode k1_0000000000000 --form-key-file " + path_);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("has mode 0644"), std::string::npos) << r.err;
}

TEST(Cli, GetReadableAndBase32KeepOrderAndDecodeBack) {
  testing::ServerConfig config;
  config.node_id = 12;
  testing::TestServer server(config);
  CliResult r = run("get -n 50 --form readable --tag ORD --timeout-ms 5000 --server " + server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 50U);
  EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end())) << r.out;
  EXPECT_EQ(lines[0].size(), 25U);
  EXPECT_EQ(lines[0].substr(15, 3), "ORD");
  r = run("decode " + lines[7] + " --json --timeout-ms 5000 --server " + server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"node\":12,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"tag\":\"ORD\""), std::string::npos) << r.out;

  r = run("get -n 50 --form base32 --timeout-ms 5000 --server " + server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 50U);
  EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end())) << r.out;
  EXPECT_EQ(lines[0].size(), 13U);

  r = run("get -n 2 --form base32 --format json --timeout-ms 5000 --server " + server.address());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.size(), std::string("[\"0000000000000\",\"0000000000000\"]\n").size()) << r.out;
  EXPECT_EQ(r.out.substr(0, 2), "[\"");
}

TEST(Cli, GetRefusesFormFlagsThatDoNotFit) {
  CliResult r = run("get --form readable --tag ord");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--tag"), std::string::npos) << r.err;
  r = run("get --form readable --tag TOOLONG");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--tag"), std::string::npos) << r.err;
  r = run("get --tag ORD --server 127.0.0.1:1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--tag needs --form readable"), std::string::npos) << r.err;
  r = run("get --form opaque --server 127.0.0.1:1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--form opaque needs --form-key-file"), std::string::npos) << r.err;
  r = run("get --format hex --form base32 --server 127.0.0.1:1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("disagree"), std::string::npos) << r.err;
  r = run("get --form opaque --form-key-file /nonexistent/keys.toml --server 127.0.0.1:1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("/nonexistent/keys.toml: No such file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace flurry::client
