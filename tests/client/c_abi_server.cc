// tests/client/c_abi_server.cc — see c_abi_server.h.
#include "tests/client/c_abi_server.h"

#include <memory>

#include "tests/client/test_server.h"

namespace {
std::unique_ptr<flurry::client::testing::TestServer> server;
std::unique_ptr<flurry::client::testing::DeadServer> dead;
std::unique_ptr<flurry::client::testing::TestServer> signed_server;
}  // namespace

extern "C" {

uint16_t flurry_test_server_start(void) {
  flurry::client::testing::ServerConfig config;
  config.node_id = 3;
  config.sequence = "tickets";
  server = std::make_unique<flurry::client::testing::TestServer>(config);
  return server->port();
}

uint16_t flurry_test_dead_server_start(void) {
  dead = std::make_unique<flurry::client::testing::DeadServer>();
  return dead->port();
}

uint16_t flurry_test_signed_server_start(void) {
  flurry::client::testing::ServerConfig config;
  config.auth = true;
  signed_server = std::make_unique<flurry::client::testing::TestServer>(config);
  return signed_server->port();
}

void flurry_test_servers_stop(void) {
  signed_server.reset();
  server.reset();
  dead.reset();
}

}  // extern "C"
