// tests/control/reassign_race_test.cc — the real socket backend and the real scheduler across
// reassigns (what cluster mode does after a lost renew: fence, new node id, new durable
// ceiling). A worker blocked in recvmmsg when the renew thread (flurry-renew) reassigns must not
// answer the next request under its old node id above that node's durable watermark. Before
// core::load_burst_ceiling it did so in 20 of 20 trials (found in review); each trial here
// recreates that window: the clock (a ManualClock that both the backend and the scheduler
// read) is stepped past the old ceiling, so any ID the old handler issues under the new
// ceiling lies above what was durable for the old node.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "control/scheduler.h"
#include "dataplane/backend.h"
#include "proto/wire.h"
#include "tests/support/manual_clock.h"
#include "tests/support/ports.h"
#include "tests/support/status.h"

namespace flurry {
namespace {

struct RecordingDurability final : control::Durability {
  std::uint32_t node = 0;
  std::map<std::uint32_t, std::uint64_t> durable_by_node;  // highest W made durable per node
  Status make_durable(std::uint64_t watermark_t) override {
    auto& durable = durable_by_node[node];
    durable = std::max(durable, watermark_t);
    return {};
  }
  control::DegradedCause failure_cause() const override { return control::DegradedCause::disk; }
};

TEST(ReassignRace, NoAnswerUnderTheOldNodeIdAboveItsDurableWatermark) {
  const std::uint16_t port = testing::free_udp_port();
  proto::Layout layout;
  core::Shared shared(1);
  testing::ManualClock clock;
  RecordingDurability durability;
  control::WatermarkScheduler scheduler(layout, control::Timings::of_lead(50, layout.time_unit_ms),
                                        durability, shared, clock);
  durability.node = 1;
  ASSERT_TRUE(testing::is_ok(scheduler.start(1, 0)));
  dataplane::BackendConfig config;
  config.listen.port = port;
  config.workers = 1;
  config.pin_workers = false;
  config.layout = layout;
  config.clock = &clock;
  auto backend = dataplane::make_socket_backend(config, shared);
  ASSERT_TRUE(testing::is_ok(backend->start()));

  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  timeval timeout{10, 0};  // generous: a loaded machine must not turn a slow answer into a failure
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  std::uint64_t request_id = 1;
  auto get = [&](proto::Decoded* first, proto::Status* status) {
    std::array<std::uint8_t, proto::datagram_size_max> buffer{};
    proto::Request request;
    request.opcode = proto::Opcode::get_ids;
    request.count = 1;
    request.request_id = request_id++;
    const auto size = proto::encode_request(request, buffer);
    sendto(fd, buffer.data(), size, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    for (;;) {  // skip a late answer to an earlier request
      const ssize_t got = recv(fd, buffer.data(), buffer.size(), 0);
      if (got <= 0) return false;
      const auto view =
          proto::decode_response(std::span<const std::uint8_t>(buffer.data(), static_cast<std::size_t>(got)));
      if (view.error != proto::ResponseError::ok || view.header.request_id != request.request_id) continue;
      *status = view.header.status;
      if (*status == proto::Status::ok) *first = layout.decode(view.range(0).first);
      return true;
    }
  };

  proto::Decoded decoded{};
  proto::Status status{};
  ASSERT_TRUE(get(&decoded, &status));
  int answered_new_node = 0;
  for (int trial = 0; trial < 20; ++trial) {
    // No tick: the held ceiling (a lead of 50 ms) stays while the clock passes it.
    clock.advance_ms(120);
    const std::uint32_t old_node = durability.node;
    const std::uint32_t new_node = old_node + 1;
    durability.node = new_node;
    scheduler.fence();
    ASSERT_TRUE(testing::is_ok(scheduler.reassign(new_node, durability.durable_by_node[old_node])));
    ASSERT_TRUE(get(&decoded, &status)) << "trial " << trial;
    if (status != proto::Status::ok) continue;
    if (decoded.node == old_node) {
      EXPECT_LE(decoded.time, durability.durable_by_node[old_node])
          << "trial " << trial << ": answered under the old node id above its durable watermark";
    } else {
      EXPECT_EQ(decoded.node, new_node);
      EXPECT_GT(decoded.time, durability.durable_by_node[old_node])
          << "the new node must start above the floor";
      ++answered_new_node;
    }
  }
  EXPECT_GT(answered_new_node, 10) << "the worker should serve under the new node id after most reassigns";
  close(fd);
  backend->stop();
}

}  // namespace
}  // namespace flurry
