// tests/control/config_test.cc — the configuration's derived values (control/timings.h), computed
// and cross-checked once by parse_config: the periods and timeouts the lead and the lease TTL
// imply, and the combinations that are refused before anything is touched.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "control/config.h"
#include "control/timings.h"
#include "tests/support/temp_dir.h"

namespace flurry::control {
namespace {

// parse_config over flurryd's own arguments; "" when it succeeded, else its message.
std::string parse(const std::vector<std::string>& args, Config* config) {
  std::vector<const char*> argv = {"flurryd"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  const Result<Parsed> parsed = parse_config(static_cast<int>(argv.size()), argv.data(), config);
  return parsed.ok() ? "" : parsed.message();
}

TEST(Timings, LocalModeDerivesThePeriodsFromTheLead) {
  Config config;
  ASSERT_EQ(parse({"--state-dir", "/tmp/flurry-config-test"}, &config), "");
  const Timings& t = config.timings;
  EXPECT_EQ(t.lead_ms, 3000U);
  EXPECT_EQ(t.lead_t, 3000U);  // snowflake: 1 ms units
  EXPECT_EQ(t.tick_ms, 100U);  // 3000 / 16 = 187, at most 100
  EXPECT_EQ(t.stall_ms, 750U);
  EXPECT_EQ(t.lease_ttl_s, 0U) << "no lease in local mode";

  Config short_lead;
  ASSERT_EQ(parse({"--state-dir", "/tmp/flurry-config-test", "--lead-ms", "40", "--layout", "js-safe"},
                  &short_lead),
            "");
  EXPECT_EQ(short_lead.timings.lead_t, 4U);      // 10 ms units
  EXPECT_EQ(short_lead.timings.tick_ms, 2U);     // 40 / 16
  EXPECT_EQ(short_lead.timings.stall_ms, 100U);  // 10, at least 100
}

TEST(Timings, ClusterModeDerivesTheEtcdTimeoutsFromTheLeadAndTheTtl) {
  Config config;
  ASSERT_EQ(parse({"--state-dir", "/tmp/flurry-config-test", "--etcd", "http://127.0.0.1:2379", "--cluster",
                   "c", "--lease-ttl-s", "3", "--lead-ms", "2000"},
                  &config),
            "");
  const Timings& t = config.timings;
  EXPECT_EQ(t.lease_ttl_s, 3U);
  EXPECT_EQ(t.etcd_request_timeout_ms, 333U);  // 2000 / 6
  EXPECT_EQ(t.etcd_connect_timeout_ms, 200U);
  EXPECT_EQ(t.keepalive_timeout_ms, 500U);      // 3000 / 6
  EXPECT_EQ(t.sequence_lease_margin_ms, 600U);  // 3000 / 5, at least 500
}

TEST(Timings, ALeadAboveTwoThirdsOfTheLeaseIsRefusedNamingBothFlags) {
  // A node paused past its lease must find its held ceiling in the past when it resumes.
  Config config;
  const std::string error =
      parse({"--state-dir", "/tmp/flurry-config-test", "--etcd", "http://127.0.0.1:2379", "--cluster", "c",
             "--lease-ttl-s", "3", "--lead-ms", "2001"},
            &config);
  EXPECT_NE(error.find("--lead-ms 2001 is more than 2/3 of the lease TTL (2000 ms at --lease-ttl-s 3)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("lower --lead-ms or raise --lease-ttl-s"), std::string::npos) << error;
  // Local mode has no lease: the same lead is fine.
  Config local;
  EXPECT_EQ(
      parse({"--state-dir", "/tmp/flurry-config-test", "--lease-ttl-s", "3", "--lead-ms", "2001"}, &local),
      "");
}

TEST(Timings, ALeadShorterThanTwoTimeUnitsIsRefused) {
  Config config;
  const std::string error = parse(
      {"--state-dir", "/tmp/flurry-config-test", "--time-unit-ms", "1000", "--lead-ms", "1500"}, &config);
  EXPECT_NE(error.find("--lead-ms 1500 is less than two 1000 ms time units"), std::string::npos) << error;
  EXPECT_FALSE(derive_timings(1999, 1000, std::nullopt).ok());
  EXPECT_TRUE(derive_timings(2000, 1000, std::nullopt).ok());
}

TEST(Describe, TheEffectiveConfigurationReadsBackAsTheSameConfiguration) {
  // describe() is written from the settings table the flags and the file are read with: every
  // setting appears once, and the text, read back as a --config file, gives the same text.
  flurry::testing::TempDir dir;
  Config config;
  ASSERT_EQ(
      parse({"--state-dir", dir.sub("a \"quoted\" dir"), "--etcd",
             "http://127.0.0.1:2379,http://127.0.0.1:2380", "--cluster", "c", "--workers", "3", "--layout",
             "js-safe", "--udp-gso=false", "--clock-offset-ms", "-5", "--resp-listen", "127.0.0.1:6380"},
            &config),
      "");
  const std::string text = describe(config);
  EXPECT_NE(text.find("workers = 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("udp_gso = false\n"), std::string::npos) << text;
  EXPECT_NE(text.find("etcd = [\"http://127.0.0.1:2379\", \"http://127.0.0.1:2380\"]\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("layout = \"js-safe\"  # "), std::string::npos) << text;
  const std::string file = dir.sub("flurryd.toml");
  std::ofstream(file) << text;
  Config again;
  ASSERT_EQ(parse({"--config", file}, &again), "") << text;
  EXPECT_EQ(describe(again), text);
}

// Every ADDR:PORT is parsed once, where it is read, into a typed Endpoint: the flags' and the
// file's errors name the flag and the part that is wrong; an empty door flag is that door off;
// the front doors are listed in their core slices' order with their endpoints.
TEST(Endpoints, ListenAndTheDoorsAreParsedWhereTheyAreRead) {
  Config config;
  ASSERT_EQ(
      parse({"--state-dir", "/tmp/flurry-config-test", "--listen", "127.0.0.2:7500", "--memcache-listen",
             "0.0.0.0:11311", "--resp-listen", "127.0.0.1:6380", "--metrics-listen", "127.0.0.1:9500"},
            &config),
      "");
  EXPECT_EQ(config.listen, (Endpoint{"127.0.0.2", 7500}));
  EXPECT_EQ(config.metrics_listen, (Endpoint{"127.0.0.1", 9500}));
  EXPECT_FALSE(config.http_listen.enabled());
  ASSERT_EQ(config.front_ends.size(), 2U);
  EXPECT_EQ(config.front_ends[0].kind, core::FrontEndKind::resp);
  EXPECT_EQ(config.front_ends[0].endpoint, (Endpoint{"127.0.0.1", 6380}));
  EXPECT_EQ(config.front_ends[1].kind, core::FrontEndKind::memcache);
  EXPECT_EQ(config.front_ends[1].endpoint.text(), "0.0.0.0:11311");
  EXPECT_EQ(config.core_slices(), 3U);

  auto error_of = [](const std::vector<std::string>& args) {
    Config refused;
    std::vector<std::string> all = {"--state-dir", "/tmp/flurry-config-test"};
    all.insert(all.end(), args.begin(), args.end());
    return parse(all, &refused);
  };
  EXPECT_NE(
      error_of({"--listen", "127.0.0.1"}).find("--listen '127.0.0.1' must be ADDR:PORT, e.g. 127.0.0.1:7420"),
      std::string::npos);
  EXPECT_NE(error_of({"--listen", ""}).find("--listen '' must be ADDR:PORT"), std::string::npos)
      << "the UDP address cannot be off";
  EXPECT_NE(
      error_of({"--resp-listen", "127.0.0.1:0"}).find("--resp-listen '127.0.0.1:0': port must be 1..65535"),
      std::string::npos);
  EXPECT_NE(error_of({"--http-listen", "127.0.0.1:70000"}).find("port must be 1..65535"), std::string::npos);
  EXPECT_NE(error_of({"--metrics-listen", "localhost:9420"})
                .find("--metrics-listen 'localhost:9420': 'localhost' is not an IPv4 address"),
            std::string::npos);

  // The address as inet_pton(AF_INET) takes it: four parts of 0..255, no leading zeros.
  for (const char* good : {"0.0.0.0:1", "255.255.255.255:65535", "10.0.20.3:7420"}) {
    EXPECT_TRUE(parse_endpoint(good, "--x", "", "").ok()) << good;
  }
  for (const char* bad : {"256.0.0.1:1", "01.2.3.4:1", "1.2.3:1", "1.2.3.4.5:1", " 1.2.3.4:1", "1..3.4:1",
                          "1.2.3.4 :1", "::1:7420", "1.2.3.-4:1", "1.2.3.4:+1", "1.2.3.4:65536", ":7420"}) {
    EXPECT_FALSE(parse_endpoint(bad, "--x", "", "").ok()) << bad;
  }

  // A file's value is read the same way; the command line still wins, and "" turns a door off.
  flurry::testing::TempDir dir;
  const std::string file = dir.sub("flurryd.toml");
  std::ofstream(file)
      << "listen = \"127.0.0.3:7600\"\nhttp_listen = \"127.0.0.1:8081\"\nresp_listen = \"\"\n";
  Config from_file;
  ASSERT_EQ(parse({"--state-dir", dir.path(), "--config", file, "--listen", "127.0.0.4:7700"}, &from_file),
            "");
  EXPECT_EQ(from_file.listen, (Endpoint{"127.0.0.4", 7700}));
  EXPECT_EQ(from_file.http_listen, (Endpoint{"127.0.0.1", 8081}));
  ASSERT_EQ(from_file.front_ends.size(), 1U);
  EXPECT_EQ(from_file.front_ends[0].kind, core::FrontEndKind::http);
  std::ofstream(file) << "metrics_listen = \"9420\"\n";
  Config bad_file;
  EXPECT_NE(parse({"--state-dir", dir.path(), "--config", file}, &bad_file)
                .find("metrics_listen --metrics-listen '9420' must be ADDR:PORT"),
            std::string::npos);
}

// --auth required opens the RESP, HTTP and memcached doors: each logs callers in with a key's
// door password (the memcached one with memcached's ASCII login, a set).
TEST(Auth, RequiredTakesEveryDoor) {
  Config doors;
  EXPECT_EQ(parse({"--state-dir", "/tmp/flurry-config-test", "--auth", "required", "--key-file",
                   "/tmp/k.toml", "--resp-listen", "127.0.0.1:6380", "--http-listen", "127.0.0.1:8080",
                   "--memcache-listen", "127.0.0.1:11211"},
                  &doors),
            "");
  EXPECT_EQ(doors.auth_mode, core::AuthMode::required);
  EXPECT_EQ(doors.front_ends.size(), 3U);
  Config optional;
  EXPECT_EQ(parse({"--state-dir", "/tmp/flurry-config-test", "--auth", "optional", "--key-file",
                   "/tmp/k.toml", "--memcache-listen", "127.0.0.1:11211"},
                  &optional),
            "");
}

// --door-sequence-wait-ms: 200 by default, 1..5000, a value outside refused naming the flag.
TEST(DoorSequenceWait, DefaultsTo200AndRefusesWhatIsOutOfRange) {
  Config config;
  EXPECT_EQ(parse({"--state-dir", "/tmp/flurry-config-test"}, &config), "");
  EXPECT_EQ(config.door_sequence_wait_ms, 200U);
  Config set;
  EXPECT_EQ(parse({"--state-dir", "/tmp/flurry-config-test", "--door-sequence-wait-ms", "5000"}, &set), "");
  EXPECT_EQ(set.door_sequence_wait_ms, 5000U);
  for (const char* bad : {"0", "5001", "-1", "soon"}) {
    Config refused;
    const std::string message =
        parse({"--state-dir", "/tmp/flurry-config-test", "--door-sequence-wait-ms", bad}, &refused);
    EXPECT_NE(message.find("door-sequence-wait-ms"), std::string::npos) << bad << ": " << message;
  }
}

// --http-tls-cert and --http-tls-key: together, and only for the HTTP front end.
TEST(HttpTls, CertificateAndKeyComeTogetherWithTheHttpDoor) {
  const std::vector<std::string> base = {"--state-dir", "/tmp/flurry-config-test"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    Config config;
    return parse(args, &config);
  };
  EXPECT_EQ(with({"--http-listen", "127.0.0.1:8443", "--http-tls-cert", "c.pem", "--http-tls-key", "k.pem"}),
            "");
  EXPECT_NE(with({"--http-listen", "127.0.0.1:8443", "--http-tls-cert", "c.pem"}).find("come together"),
            std::string::npos);
  EXPECT_NE(with({"--http-listen", "127.0.0.1:8443", "--http-tls-key", "k.pem"}).find("come together"),
            std::string::npos);
  EXPECT_NE(with({"--http-tls-cert", "c.pem", "--http-tls-key", "k.pem"}).find("add --http-listen"),
            std::string::npos);
  Config config;
  ASSERT_EQ(parse({"--state-dir", "/tmp/flurry-config-test", "--http-listen", "127.0.0.1:8443",
                   "--http-tls-cert", "c.pem", "--http-tls-key", "k.pem"},
                  &config),
            "");
  EXPECT_EQ(config.http_tls_key.front(), '/') << "made absolute: " << config.http_tls_key;
}

}  // namespace
}  // namespace flurry::control
