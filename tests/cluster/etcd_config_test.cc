// tests/cluster/etcd_config_test.cc — the etcd client's configuration checks that need no etcd
// (control/cluster/etcd_client.h check_config, read_password_file): which TLS and user flags
// go together, files that must be there, the password file opened once without following a
// symlink and checked on its descriptor, and a refusal that names the flag to fix. The real
// TLS and authentication exchanges are in etcd_tls_test (a real etcd).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "control/cluster/etcd_client.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"

namespace flurry::control::cluster {
namespace {

using flurry::testing::failure;
using flurry::testing::is_ok;

class EtcdConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = dir_.sub(name);
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  EtcdConfig tls() {
    EtcdConfig config;
    config.endpoints = {"https://127.0.0.1:2379", "https://127.0.0.2:2379"};
    config.ca_file = write("ca.crt", "not checked here: curl reads it");
    config.cert_file = write("client.crt", "-");
    config.key_file = write("client.key", "-");
    config.user = "flurry";
    config.password_file = write("password", "secret\n");
    return config;
  }
  testing::TempDir dir_;
};

TEST_F(EtcdConfigTest, PlainHttpNeedsNothingMore) {
  EtcdConfig config;
  config.endpoints = {"http://127.0.0.1:2379"};
  EXPECT_TRUE(is_ok(check_config(config)));
}

TEST_F(EtcdConfigTest, FullTlsAndUserSetupIsAccepted) { EXPECT_TRUE(is_ok(check_config(tls()))); }

TEST_F(EtcdConfigTest, MismatchesNameTheFlagToFix) {
  struct Case {
    const char* what;
    void (*change)(EtcdConfig&);
    const char* expected;
  };
  const Case cases[] = {
      {"no endpoint", [](EtcdConfig& c) { c.endpoints.clear(); }, "--etcd"},
      {"mixed schemes", [](EtcdConfig& c) { c.endpoints[1] = "http://127.0.0.2:2379"; },
       "mixes http:// and https://"},
      {"TLS files with http://", [](EtcdConfig& c) { c.endpoints = {"http://127.0.0.1:2379"}; },
       "are for https:// endpoints"},
      {"cert without key", [](EtcdConfig& c) { c.key_file.clear(); }, "--etcd-cert needs --etcd-key"},
      {"key without cert", [](EtcdConfig& c) { c.cert_file.clear(); }, "--etcd-key needs --etcd-cert"},
      {"user without password file", [](EtcdConfig& c) { c.password_file.clear(); },
       "--etcd-user needs --etcd-password-file"},
      {"password file without user", [](EtcdConfig& c) { c.user.clear(); },
       "--etcd-password-file needs --etcd-user"},
      {"missing CA file", [](EtcdConfig& c) { c.ca_file += ".missing"; }, "--etcd-cacert"},
      {"missing certificate", [](EtcdConfig& c) { c.cert_file += ".missing"; }, "--etcd-cert"},
      {"missing key", [](EtcdConfig& c) { c.key_file += ".missing"; }, "--etcd-key"},
      {"missing password file", [](EtcdConfig& c) { c.password_file += ".missing"; }, "etcd password file"},
  };
  for (const Case& c : cases) {
    EtcdConfig config = tls();
    c.change(config);
    const std::string error = failure(check_config(config));
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.what << ": " << error;
    // Nothing is created from a refused config either.
    EXPECT_NE(failure(EtcdClient::create(config)).find(c.expected), std::string::npos) << c.what;
  }
}

TEST_F(EtcdConfigTest, PasswordFileIsPrivateAndReadWithoutItsLineBreak) {
  EXPECT_EQ(*read_password_file(write("p1", "s3cret\n")), "s3cret");
  EXPECT_EQ(*read_password_file(write("p2", "s3cret\r\n")), "s3cret");
  EXPECT_EQ(*read_password_file(write("p3", "no line break")), "no line break");
  EXPECT_NE(failure(read_password_file(write("p4", "s3cret\n", 0640))).find("chmod 600"), std::string::npos);
  EXPECT_NE(failure(read_password_file(write("p5", "s3cret\n", 0604))).find("chmod 600"), std::string::npos);
  EXPECT_NE(failure(read_password_file(write("p6", ""))).find("is empty"), std::string::npos);
  EXPECT_NE(failure(read_password_file(write("p7", "\n"))).find("is empty"), std::string::npos);
  EXPECT_NE(failure(read_password_file(write("p8", "one\ntwo\n"))).find("more than one line"),
            std::string::npos);
  EXPECT_NE(failure(read_password_file(write("p9", std::string(2000, 'x')))).find("larger"),
            std::string::npos);
  // A symlink to a good file is refused: the link could be pointed elsewhere later.
  const std::string target = write("p10", "s3cret\n");
  ASSERT_EQ(::symlink(target.c_str(), dir_.sub("link").c_str()), 0);
  EXPECT_NE(failure(read_password_file(dir_.sub("link"))).find("is a symlink"), std::string::npos);
  EXPECT_NE(failure(read_password_file(dir_.sub("link"))).find("--etcd-password-file"), std::string::npos);
  // A directory is not a password file.
  EXPECT_FALSE(failure(read_password_file(dir_.path())).empty());
}

TEST_F(EtcdConfigTest, PasswordFileOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const std::string path = write("other", "s3cret\n");
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  EXPECT_NE(failure(read_password_file(path)).find("belongs to uid 65534"), std::string::npos);
}

}  // namespace
}  // namespace flurry::control::cluster
