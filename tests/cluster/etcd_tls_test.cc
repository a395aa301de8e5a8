// tests/cluster/etcd_tls_test.cc — cluster mode against etcd as production runs it: https://
// with a CA, client certificates (--client-cert-auth) and etcd's user/password authentication.
//
// Each test makes its own CA, etcd server certificate (127.0.0.1 in its subjectAltName) and
// client certificates with Debian's openssl in a temporary directory, starts a real etcd on
// loopback (free ports, temporary data dir, stopped by PID) with TLS, sets up a root user and a
// `flurry` user whose role may read and write /flurry/ with etcdctl, enables auth, and starts
// real flurryd processes with --etcd https://... --etcd-cacert --etcd-cert --etcd-key
// --etcd-user --etcd-password-file. Every ID received is checked for duplicates; every wait
// is bounded. Skips (exit 77) only when etcd, etcdctl, openssl or flurryd is missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "control/cluster/etcd_client.h"
#include "control/control_server.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/support/child_process.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"

namespace flurry::test {
namespace {

constexpr const char* etcd_binary = "/usr/bin/etcd";
constexpr const char* etcdctl_binary = "/usr/bin/etcdctl";
constexpr const char* openssl_binary = "/usr/bin/openssl";

bool have_tools() {
  const char* flurryd = std::getenv("FLURRYD");
  return flurryd != nullptr && access(flurryd, X_OK) == 0 && access(etcd_binary, X_OK) == 0 &&
         access(etcdctl_binary, X_OK) == 0 && access(openssl_binary, X_OK) == 0;
}

void write_file(const std::string& path, const std::string& text, mode_t mode = 0600) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

// Certificates made with openssl: a CA, etcd's server certificate, flurryd's client
// certificate (no Common Name: etcd's JSON gateway answers 400 to a client certificate with
// one), a client certificate with a Common Name, and a second CA that signed none of them.
class Pki {
 public:
  explicit Pki(std::string dir) : dir_(std::move(dir)) {}
  // Empty, or what openssl said when it failed.
  std::string make() {
    std::filesystem::create_directories(dir_);
    std::string error = make_ca("ca", "flurry-test-ca");
    if (error.empty()) error = make_ca("other-ca", "another-ca");
    if (error.empty()) {
      error = make_cert("server", "/CN=etcd-test-server",
                        "subjectAltName=IP:127.0.0.1\n"
                        "extendedKeyUsage=serverAuth,clientAuth\n",
                        2);  // etcd's gateway dials etcd with it
    }
    if (error.empty()) {
      error =
          make_cert("client", "/O=flurry", "subjectAltName=DNS:flurryd\nextendedKeyUsage=clientAuth\n", 3);
    }
    if (error.empty()) {
      error = make_cert("client-cn", "/CN=flurryd", "extendedKeyUsage=clientAuth\n", 4);
    }
    return error;
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string ca() const { return path("ca.crt"); }

 private:
  std::string openssl(const std::vector<std::string>& args) {
    const testing::RunResult run = testing::run_to_end(openssl_binary, args, 30000);
    return run.exit_code == 0 ? std::string() : "openssl " + args[0] + " failed: " + run.output;
  }
  std::string make_ca(const std::string& name, const std::string& common_name) {
    return openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", path(name + ".key"), "-out", path(name + ".crt"), "-days", "2", "-subj",
                    "/CN=" + common_name});
  }
  std::string make_cert(const std::string& name, const std::string& subject, const std::string& extensions,
                        int serial) {
    write_file(path(name + ".ext"), extensions, 0644);
    std::string error =
        openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                 path(name + ".key"), "-out", path(name + ".csr"), "-subj", subject});
    if (!error.empty()) return error;
    return openssl({"x509", "-req", "-in", path(name + ".csr"), "-CA", ca(), "-CAkey", path("ca.key"),
                    "-set_serial", std::to_string(serial), "-days", "2", "-out", path(name + ".crt"),
                    "-extfile", path(name + ".ext")});
  }
  std::string dir_;
};

// One GET_IDS until an OK answer with IDs (bounded).
std::optional<Answer> get_ok(UdpClient& client, std::uint64_t timeout_ms) {
  const std::uint64_t deadline = now_ms() + timeout_ms;
  while (now_ms() < deadline) {
    auto answer = client.get_ids(16, 200);
    if (answer && answer->status == proto::Status::ok && !answer->ranges.empty()) return answer;
    sleep_ms(20);
  }
  return std::nullopt;
}

nlohmann::json lease_of(Flurryd& node) {
  nlohmann::json lease;
  if (!testing::is_ok(testing::take(control::control_request(node.control_socket(), "lease"), &lease)))
    return {};
  return lease;
}

class SecureEtcd : public ::testing::Test {
 protected:
  // etcd with TLS, client certificates required, and auth enabled with users root, flurry
  // (readwrite on /flurry/) and stranger (readwrite on /other/ only).
  void start_etcd(std::vector<std::string> extra_args = {}) {
    pki_ = std::make_unique<Pki>(dir_.sub("pki"));
    const std::string made = pki_->make();
    ASSERT_EQ(made, "");
    EtcdTls tls;
    tls.ca_file = pki_->ca();
    tls.cert_file = pki_->path("server.crt");
    tls.key_file = pki_->path("server.key");
    tls.client_cert = pki_->path("client.crt");
    tls.client_key = pki_->path("client.key");
    etcd_ = std::make_unique<Etcd>(dir_.path(), tls, std::move(extra_args));
    std::string error;
    ASSERT_TRUE(etcd_->start(&error)) << error;
    for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
             {"user", "add", "root:" + root_password_},
             {"user", "grant-role", "root", "root"},
             {"role", "add", "flurry"},
             {"role", "grant-permission", "flurry", "--prefix=true", "readwrite", "/flurry/"},
             {"user", "add", "flurry:" + flurry_password_},
             {"user", "grant-role", "flurry", "flurry"},
             {"role", "add", "other"},
             {"role", "grant-permission", "other", "--prefix=true", "readwrite", "/other/"},
             {"user", "add", "stranger:" + flurry_password_},
             {"user", "grant-role", "stranger", "other"},
             {"auth", "enable"},
         }) {
      const testing::RunResult run = etcdctl(command);
      ASSERT_EQ(run.exit_code, 0) << command[0] << " " << command[1] << ": " << run.output;
    }
    write_file(password_file_, flurry_password_ + "\n");
  }

  testing::RunResult etcdctl(std::vector<std::string> command, const std::string& user = {}) {
    std::vector<std::string> args = {"--endpoints",
                                     etcd_->url(),
                                     "--cacert",
                                     pki_->ca(),
                                     "--cert",
                                     pki_->path("client.crt"),
                                     "--key",
                                     pki_->path("client.key"),
                                     "--dial-timeout",
                                     "5s",
                                     "--command-timeout",
                                     "15s"};
    if (!user.empty()) args.insert(args.end(), {"--user", user});
    args.insert(args.end(), command.begin(), command.end());
    return testing::run_to_end(etcdctl_binary, args, 30000);
  }

  // How a member reaches etcd: by default everything right; a case changes one part (empty:
  // the flag is left out).
  struct Access {
    std::string ca, cert, key, user, password_file;
  };
  Access right() const {
    return {pki_->ca(), pki_->path("client.crt"), pki_->path("client.key"), "flurry", password_file_};
  }
  FlurrydOptions secure(const Access& access) const {
    FlurrydOptions o;
    o.etcd_url = etcd_->url();
    o.cluster = "tls";
    const std::pair<const char*, const std::string*> flags[] = {
        {"--etcd-cacert", &access.ca},
        {"--etcd-cert", &access.cert},
        {"--etcd-key", &access.key},
        {"--etcd-user", &access.user},
        {"--etcd-password-file", &access.password_file}};
    for (const auto& [flag, value] : flags) {
      if (!value->empty()) o.extra_args.insert(o.extra_args.end(), {flag, *value});
    }
    return o;
  }
  FlurrydOptions secure() const { return secure(right()); }

  std::unique_ptr<Flurryd> start(const std::string& name, const FlurrydOptions& options) {
    auto node = std::make_unique<Flurryd>(dir_.path(), name, options);
    EXPECT_TRUE(node->start());
    return node;
  }

  testing::TempDir dir_{"flurry-etcd-tls-"};
  std::unique_ptr<Pki> pki_;
  std::unique_ptr<Etcd> etcd_;
  std::string root_password_ = "root-pw-0b7e";
  std::string flurry_password_ = "flurry-pw-9c1d";
  std::string password_file_ = dir_.sub("flurry.password");
};

// The client's own count (control/cluster/etcd_client.h): an authentication after etcd refused
// the token in use is a re-authentication even when the first try at it failed. Here etcd
// restarts (forgetting every token) while the password file is away, so the authentication
// after the refusal fails; with the file back the next request authenticates. A flurryd under
// load saw the same when that authentication timed out, and counted it a first authentication
// (flurry_etcd_authentications_total{reason="first"}), which etcd_tls below once caught.
TEST_F(SecureEtcd, AnAuthenticationAfterARefusalIsARenewalEvenWhenItsFirstTryFailed) {
  if (!have_tools()) GTEST_SKIP() << "needs etcd, etcdctl (etcd-client), openssl and $FLURRYD";
  ASSERT_NO_FATAL_FAILURE(start_etcd({"--auth-token", "simple"}));
  control::cluster::EtcdConfig config{{etcd_->url()}};
  config.ca_file = pki_->ca();
  config.cert_file = pki_->path("client.crt");
  config.key_file = pki_->path("client.key");
  config.user = "flurry";
  config.password_file = password_file_;
  // Every answer here must come: the TLS handshake too (the client's default allows 300 ms for
  // the connection, which a flake hunt saw run out under TSan: "SSL connection timeout").
  config.request_timeout_ms = 15000;
  config.connect_timeout_ms = 15000;
  auto kv = control::cluster::EtcdClient::create(config);
  ASSERT_TRUE(kv.ok()) << kv.message();
  const auto put = [&](const std::string& value) {
    return (*kv)->txn(control::cluster::Txn{{}, {control::cluster::Op::put("/flurry/renewal", value)}, {}});
  };
  const auto first = put("1");
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ((*kv)->authentications(), 1U);
  EXPECT_EQ((*kv)->reauthentications(), 0U);

  etcd_->stop();
  std::string error;
  ASSERT_TRUE(etcd_->start(&error)) << error;
  const std::string away = password_file_ + ".away";
  ASSERT_EQ(std::rename(password_file_.c_str(), away.c_str()), 0);
  // The token refused, and no password to authenticate with. The first request after the
  // restart may instead meet the connection to the old etcd broken ("etcd unreachable (...:
  // Send failure: Broken pipe)", seen in a flake hunt): nothing reached etcd, the token is
  // untouched, and the next request connects anew (bounded).
  auto refused = put("2");
  for (int tries = 1; tries < 10 && !refused.ok() && refused.message().find("etcd unreachable") == 0;
       ++tries) {
    refused = put("2");
  }
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find(password_file_), std::string::npos) << refused.message();
  ASSERT_EQ(std::rename(away.c_str(), password_file_.c_str()), 0);
  const auto again = put("3");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ((*kv)->authentications(), 2U);
  EXPECT_EQ((*kv)->reauthentications(), 1U)
      << "the token etcd refused was renewed: not a first authentication";
  const auto after = put("4");  // and nothing is left over for the next request
  ASSERT_TRUE(after.ok()) << after.message();
  EXPECT_EQ((*kv)->authentications(), 2U);
  EXPECT_EQ((*kv)->reauthentications(), 1U);
}

// Two members lease node ids and serve over TLS as etcd user `flurry`. etcd runs with simple
// tokens that expire after 1 s without use (--auth-token-ttl 1; a serving member uses its token
// far more often): each member is paused (SIGSTOP, as a frozen VM) for 3 s, so its token expires,
// and when it resumes etcd refuses the token; it authenticates again and serves. Then etcd
// restarts and forgets every token, and both authenticate again and serve. No ID twice across
// both members and the whole run.
TEST_F(SecureEtcd, MembersLeaseAndServeOverTlsAsAnEtcdUserThroughTokenExpiryAndRestart) {
  if (!have_tools()) GTEST_SKIP() << "needs etcd, etcdctl (etcd-client), openssl and $FLURRYD";
  ASSERT_NO_FATAL_FAILURE(start_etcd({"--auth-token", "simple", "--auth-token-ttl", "1"}));
  auto a = start("a", secure());
  auto b = start("b", secure());
  ASSERT_TRUE(a->wait_serving(30000)) << a->process().log();
  ASSERT_TRUE(b->wait_serving(30000)) << b->process().log();
  EXPECT_NE(a->process().log().find("as etcd user 'flurry'"), std::string::npos);

  std::vector<proto::Range> ranges;
  std::map<std::uint16_t, std::size_t> answers_by_node;
  UdpClient client_a(a->port());
  UdpClient client_b(b->port());
  auto take = [&](UdpClient& client) {
    auto answer = client.get_ids(16, 200);
    if (!answer || answer->status != proto::Status::ok) return false;
    ranges.insert(ranges.end(), answer->ranges.begin(), answer->ranges.end());
    ++answers_by_node[answer->node];
    return true;
  };
  auto reauthentications = [](Flurryd& node) {
    return lease_of(node).value("etcd_reauthentications", std::uint64_t{0});
  };

  // Phase 1: both serve; then each is paused past its token's life and resumed.
  ASSERT_TRUE(get_ok(client_a, 20000)) << a->process().log();
  ASSERT_TRUE(get_ok(client_b, 20000)) << b->process().log();
  for (int i = 0; i < 20; ++i) {
    take(client_a);
    take(client_b);
  }
  a->process().signal(SIGSTOP);
  b->process().signal(SIGSTOP);
  sleep_ms(3000);  // > 1 s TTL + etcd's 1 s check; < the 10 s lease, kept alive every 3.3 s
  a->process().signal(SIGCONT);
  b->process().signal(SIGCONT);
  const std::uint64_t expiry_deadline = now_ms() + 60000;
  while (now_ms() < expiry_deadline && (reauthentications(*a) == 0 || reauthentications(*b) == 0)) {
    take(client_a);
    take(client_b);
    sleep_ms(50);
  }
  const nlohmann::json lease_a = lease_of(*a);
  const nlohmann::json lease_b = lease_of(*b);
  ASSERT_GE(lease_a.value("etcd_reauthentications", 0), 1) << lease_a.dump() << "\n" << a->process().log();
  ASSERT_GE(lease_b.value("etcd_reauthentications", 0), 1) << lease_b.dump() << "\n" << b->process().log();
  EXPECT_EQ(lease_a.value("etcd_user", ""), "flurry");
  EXPECT_TRUE(lease_a.value("etcd_tls", false)) << lease_a.dump();
  // Still serving after the new tokens.
  ASSERT_TRUE(get_ok(client_a, 20000)) << a->process().log();
  ASSERT_TRUE(get_ok(client_b, 20000)) << b->process().log();
  // The members' keys are in etcd, where the flurry user may write: one owner each. Polled
  // (bounded) until both members hold a node id and each one's owner key is listed: a member
  // whose lease ran out while it was stopped on a loaded machine is fenced (still naming its
  // old node id, holds_node false) and claims a node id again a moment later, perhaps the
  // other one (seen in flake hunts under TSan: once a key missing, once both members naming
  // node 0; a member's lease state is printed on failure).
  testing::RunResult owners;
  nlohmann::json owner_lease_a, owner_lease_b;
  std::string owner_a, owner_b;
  for (const std::uint64_t owners_deadline = now_ms() + 20000;;) {
    owner_lease_a = lease_of(*a);
    owner_lease_b = lease_of(*b);
    owner_a = "/flurry/tls/owner/" + std::to_string(owner_lease_a.value("node_id", -1));
    owner_b = "/flurry/tls/owner/" + std::to_string(owner_lease_b.value("node_id", -1));
    owners = etcdctl({"get", "--prefix", "--keys-only", "/flurry/tls/owner/"}, "flurry:" + flurry_password_);
    const bool both = owners.exit_code == 0 && owner_lease_a.value("holds_node", false) &&
                      owner_lease_b.value("holds_node", false) && owner_a != owner_b &&
                      owners.output.find(owner_a + "\n") != std::string::npos &&
                      owners.output.find(owner_b + "\n") != std::string::npos;
    if (both || now_ms() > owners_deadline) break;
    sleep_ms(200);
  }
  const std::string owner_context =
      owners.output + "\na: " + owner_lease_a.dump() + "\nb: " + owner_lease_b.dump();
  ASSERT_EQ(owners.exit_code, 0) << owner_context;
  EXPECT_TRUE(owner_lease_a.value("holds_node", false)) << owner_context << "\n" << a->process().log();
  EXPECT_TRUE(owner_lease_b.value("holds_node", false)) << owner_context << "\n" << b->process().log();
  EXPECT_NE(owners.output.find(owner_a + "\n"), std::string::npos) << owner_context;
  EXPECT_NE(owners.output.find(owner_b + "\n"), std::string::npos) << owner_context;
  EXPECT_NE(owner_a, owner_b) << owner_context << "\n" << a->process().log() << "\n" << b->process().log();

  // Phase 2: etcd restarts (same data dir): simple tokens live in its memory, so every token
  // the members hold is refused; they authenticate again and serve.
  const std::uint64_t before_a = reauthentications(*a);
  const std::uint64_t before_b = reauthentications(*b);
  etcd_->stop();
  sleep_ms(500);
  std::string error;
  ASSERT_TRUE(etcd_->start(&error)) << error;
  const std::uint64_t restart_deadline = now_ms() + 60000;
  bool served_after = false;
  while (now_ms() < restart_deadline &&
         !(served_after && reauthentications(*a) > before_a && reauthentications(*b) > before_b)) {
    const bool got_a = take(client_a);
    const bool got_b = take(client_b);
    served_after = served_after || (got_a && got_b);
    sleep_ms(50);
  }
  EXPECT_GT(reauthentications(*a), before_a) << lease_of(*a).dump() << "\n" << a->process().log();
  EXPECT_GT(reauthentications(*b), before_b) << lease_of(*b).dump() << "\n" << b->process().log();
  // Both serve after the restart (an answer after the new tokens, not only before).
  ASSERT_TRUE(get_ok(client_a, 30000)) << a->process().log();
  ASSERT_TRUE(get_ok(client_b, 30000)) << b->process().log();
  for (int i = 0; i < 20; ++i) {
    take(client_a);
    take(client_b);
  }

  EXPECT_EQ(answers_by_node.size(), 2U);
  EXPECT_EQ(find_overlap(ranges), "");
  std::uint64_t ids = 0;
  for (const auto& r : ranges) ids += r.count;
  EXPECT_GT(ids, 0U);
  std::printf(
      "etcd_tls: %llu IDs in %zu ranges from nodes %d and %d, none twice; re-authentications %llu and %llu\n",
      static_cast<unsigned long long>(ids), ranges.size(), lease_a.value("node_id", -1),
      lease_b.value("node_id", -1), static_cast<unsigned long long>(reauthentications(*a)),
      static_cast<unsigned long long>(reauthentications(*b)));
}

// Each way to get the TLS or the user wrong, against the real etcd: flurryd stops (exit
// status not 0) or, where etcd only closes the connection, keeps serving nothing; either way
// its log names the cause and the flag to fix.
TEST_F(SecureEtcd, MisconfiguredMembersFailNamingTheCause) {
  if (!have_tools()) GTEST_SKIP() << "needs etcd, etcdctl (etcd-client), openssl and $FLURRYD";
  ASSERT_NO_FATAL_FAILURE(start_etcd());
  const std::string wrong_password = dir_.sub("wrong.password");
  write_file(wrong_password, "not-the-password\n");
  const std::string stranger_password = dir_.sub("stranger.password");
  write_file(stranger_password, flurry_password_ + "\n");
  struct Case {
    const char* what;
    Access access;
    std::vector<std::string> expected;  // in the log
  };
  auto changed = [this](auto change) {
    Access access = right();
    change(access);
    return access;
  };
  const Case exits[] = {
      {"wrong password",
       changed([&](Access& a) { a.password_file = wrong_password; }),
       {"invalid user ID or password", "--etcd-password-file " + wrong_password}},
      {"wrong CA",
       changed([&](Access& a) { a.ca = pki_->path("other-ca.crt"); }),
       {"certificate", "--etcd-cacert"}},
      {"no user",
       changed([](Access& a) { a.user = a.password_file = ""; }),
       {"user name is empty", "--etcd-user"}},
      {"user without permission on /flurry/",
       changed([&](Access& a) {
         a.user = "stranger";
         a.password_file = stranger_password;
       }),
       {"permission denied", "grant-permission"}},
      {"client certificate with a Common Name",
       changed([&](Access& a) {
         a.cert = pki_->path("client-cn.crt");
         a.key = pki_->path("client-cn.key");
       }),
       {"Common Name", "--etcd-cert"}},
  };
  int index = 0;
  for (const Case& c : exits) {
    auto node = start("bad" + std::to_string(index++), secure(c.access));
    const std::optional<int> status = node->process().wait(30000);
    ASSERT_TRUE(status.has_value()) << c.what << ": still running\n" << node->process().log();
    EXPECT_NE(*status, 0) << c.what;
    EXPECT_LT(*status, 128) << c.what << ": ended by a signal";
    const std::string log = node->process().log();
    EXPECT_EQ(log.find("serving IDs"), std::string::npos) << c.what << "\n" << log;
    for (const std::string& text : c.expected) {
      EXPECT_NE(log.find(text), std::string::npos) << c.what << ": expected '" << text << "' in\n" << log;
    }
  }

  // No client certificate: etcd closes the TLS connection, which to curl looks like any
  // dropped connection, so flurryd keeps trying (serving nothing) and says what it probably is.
  auto node = start("no-cert", secure(changed([](Access& a) { a.cert = a.key = ""; })));
  EXPECT_TRUE(node->process().wait_for_log("give --etcd-cert and --etcd-key", 30000))
      << node->process().log();
  EXPECT_TRUE(node->process().running());
  UdpClient client(node->port());
  EXPECT_FALSE(client.get_ids(1, 500).has_value());
  EXPECT_EQ(node->process().log().find("serving IDs"), std::string::npos) << node->process().log();
  node->process().stop(10000);

  // And with everything right, on the same etcd: it serves.
  auto good = start("good", secure());
  ASSERT_TRUE(good->wait_serving(30000)) << good->process().log();
  UdpClient good_client(good->port());
  const auto answer = get_ok(good_client, 20000);
  ASSERT_TRUE(answer.has_value()) << good->process().log();
  EXPECT_EQ(find_overlap(answer->ranges), "");
}

// Flag mismatches exit 2 with a message naming the fix before anything is opened: no state
// dir is created and no etcd is contacted (none runs here).
TEST(EtcdTlsFlags, MismatchesExitBeforeAnythingIsOpened) {
  if (!have_tools()) GTEST_SKIP() << "needs $FLURRYD";
  const testing::TempDir dir{"flurry-etcd-flags-"};
  const std::string pem = dir.sub("some.pem");
  write_file(pem, "-", 0644);
  const std::string password = dir.sub("password");
  write_file(password, "pw\n");
  const std::string open_password = dir.sub("open.password");
  write_file(open_password, "pw\n", 0644);
  const std::string link = dir.sub("link.password");
  ASSERT_EQ(::symlink(password.c_str(), link.c_str()), 0);
  struct Case {
    std::vector<std::string> flags;
    std::string expected;
  };
  const std::string tls = "https://127.0.0.1:1";
  const std::vector<Case> cases = {
      {{"--etcd-cacert", pem}, "--etcd-cacert is given without --etcd"},
      {{"--etcd", tls, "--etcd-cert", pem}, "--etcd-cert needs --etcd-key"},
      {{"--etcd", tls, "--etcd-key", pem}, "--etcd-key needs --etcd-cert"},
      {{"--etcd", tls, "--etcd-user", "flurry"}, "--etcd-user needs --etcd-password-file"},
      {{"--etcd", tls, "--etcd-password-file", password}, "--etcd-password-file needs --etcd-user"},
      {{"--etcd", tls, "--etcd-cacert", dir.sub("missing.pem")}, "missing.pem: No such file"},
      {{"--etcd", tls, "--etcd-user", "flurry", "--etcd-password-file", dir.sub("missing")},
       "etcd password file"},
      {{"--etcd", tls, "--etcd-user", "flurry", "--etcd-password-file", open_password}, "chmod 600"},
      {{"--etcd", tls, "--etcd-user", "flurry", "--etcd-password-file", link}, "is a symlink"},
      {{"--etcd", "http://127.0.0.1:1", "--etcd-cacert", pem}, "are for https:// endpoints"},
      {{"--etcd", tls + ",http://127.0.0.1:2"}, "mixes http:// and https://"},
      {{"--etcd", "ftp://127.0.0.1:1"}, "https://HOST:PORT"},
  };
  int index = 0;
  for (const Case& c : cases) {
    const std::string state = dir.sub("state" + std::to_string(index++));
    std::vector<std::string> args = {"--cluster", "flags", "--state-dir", state, "--listen", "127.0.0.1:1"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const testing::RunResult run = testing::run_to_end(std::getenv("FLURRYD"), args, 20000);
    EXPECT_EQ(run.exit_code, 2) << c.flags[1] << "\n" << run.output;
    EXPECT_NE(run.output.find(c.expected), std::string::npos) << "expected '" << c.expected << "' in\n"
                                                              << run.output;
    EXPECT_FALSE(std::filesystem::exists(state)) << "the state dir was made before the flags were refused";
  }
}

}  // namespace
}  // namespace flurry::test
