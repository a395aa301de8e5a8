// tests/control/node_test.cc — a whole Node (control/node/node.h) in-process: the state dir, the
// scheduler and flurry-renew, flurry-seq, the control loop and the socket backend's workers,
// over a manual clock and a simulated disk (tests/persist/crash_sim.h: real files, no real
// sync, a model of what a power loss would leave). GET_IDS over UDP on loopback (a free port),
// every ID checked against every other; then the node is drained and stopped, and the state a
// power loss would leave is opened: its durable watermark lies at or above every ID's time field.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "control/config.h"
#include "control/control_server.h"
#include "control/node/node.h"
#include "control/node/state_dir.h"
#include "persist/watermark_store.h"
#include "proto/wire.h"
#include "tests/persist/crash_sim.h"
#include "tests/support/manual_clock.h"
#include "tests/support/ports.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"

namespace flurry {
namespace {

using persist::testing::CrashSim;

// The simulated disk, one call at a time: the node writes the watermark on flurry-renew and
// the sequences on flurry-seq, and CrashSim is not thread-safe. No ring: the stores write
// with pwrite + fdatasync, which CrashSim records.
class LockedIo final : public persist::Io {
 public:
  explicit LockedIo(CrashSim& sim) : sim_(sim) {}
  int make_directory(const std::string& path, mode_t mode) override {
    std::lock_guard lock(mutex_);
    return sim_.make_directory(path, mode);
  }
  int create_file(int dir_fd, const std::string& name, mode_t mode) override {
    std::lock_guard lock(mutex_);
    return sim_.create_file(dir_fd, name, mode);
  }
  long write_at(int fd, std::span<const std::uint8_t> bytes, std::uint64_t offset) override {
    std::lock_guard lock(mutex_);
    return sim_.write_at(fd, bytes, offset);
  }
  int fsync(int fd) override {
    std::lock_guard lock(mutex_);
    return sim_.fsync(fd);
  }
  int fdatasync(int fd) override {
    std::lock_guard lock(mutex_);
    return sim_.fdatasync(fd);
  }
  int rename_no_replace(int dir_fd, const std::string& from, const std::string& to) override {
    std::lock_guard lock(mutex_);
    return sim_.rename_no_replace(dir_fd, from, to);
  }
  int link(int dir_fd, const std::string& from, const std::string& to) override {
    std::lock_guard lock(mutex_);
    return sim_.link(dir_fd, from, to);
  }
  int unlink(int dir_fd, const std::string& name) override {
    std::lock_guard lock(mutex_);
    return sim_.unlink(dir_fd, name);
  }
  Result<std::unique_ptr<persist::Ring>> open_ring(unsigned) override {
    return Error{"no io_uring on the simulated disk of this test"};
  }

 private:
  CrashSim& sim_;
  std::mutex mutex_;
};

// GET_IDS over UDP to 127.0.0.1:port; a generous timeout, so a loaded machine never turns a
// slow answer into a failure.
class UdpClient {
 public:
  explicit UdpClient(std::uint16_t port) : fd_(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    timeval timeout{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    to_.sin_family = AF_INET;
    to_.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &to_.sin_addr);
  }
  ~UdpClient() { close(fd_); }

  // The IDs of one answer (empty on RETRY or no answer); *status is the answer's status.
  std::vector<std::uint64_t> get(std::uint32_t count, proto::Status* status) {
    std::array<std::uint8_t, proto::datagram_size_max> buffer{};
    proto::Request request;
    request.opcode = proto::Opcode::get_ids;
    request.count = count;
    request.request_id = next_request_id_++;
    const std::size_t size = proto::encode_request(request, buffer);
    sendto(fd_, buffer.data(), size, 0, reinterpret_cast<const sockaddr*>(&to_), sizeof to_);
    std::vector<std::uint64_t> ids;
    for (int answers = 0; answers < 8; ++answers) {  // skips a late answer to an earlier request
      const ssize_t got = recv(fd_, buffer.data(), buffer.size(), 0);
      if (got <= 0) return ids;
      const proto::ResponseView view =
          proto::decode_response(std::span<const std::uint8_t>(buffer.data(), static_cast<std::size_t>(got)));
      if (view.error != proto::ResponseError::ok || view.header.request_id != request.request_id) continue;
      *status = view.header.status;
      for (std::size_t i = 0; i < view.header.range_count; ++i) {
        const proto::Range range = view.range(i);
        for (std::uint32_t k = 0; k < range.count; ++k) ids.push_back(range.first + k);
      }
      return ids;
    }
    return ids;
  }

 private:
  int fd_;
  sockaddr_in to_{};
  std::uint64_t next_request_id_ = 1;
};

control::Config parse(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"flurryd"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  control::Config config;
  const Result<control::Parsed> parsed =
      control::parse_config(static_cast<int>(argv.size()), argv.data(), &config);
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.message());
  return config;
}

TEST(Node, ServesUniqueIdsOverUdpAndEveryIdLiesBelowTheWatermarkThatSurvivesAPowerLoss) {
  testing::TempDir dir;
  const std::string disk = dir.sub("disk");
  ASSERT_EQ(mkdir(disk.c_str(), 0700), 0);
  CrashSim sim(disk);
  LockedIo io(sim);
  testing::ManualClock clock;
  const std::uint16_t port = testing::free_udp_port();
  const std::string control_socket = dir.sub("flurryd.sock");
  const control::Config config = parse({"--listen", "127.0.0.1:" + std::to_string(port), "--state-dir",
                                        disk + "/state", "--control-socket", control_socket, "--init",
                                        "--workers", "2", "--pin-workers=false", "--poll-spin-us", "0"});

  control::NodeOptions options;
  options.clock = &clock;
  options.io = &io;
  Result<std::unique_ptr<control::Node>> opened = control::Node::open(config, options);
  ASSERT_TRUE(opened.ok()) << opened.message();
  std::unique_ptr<control::Node> node = std::move(opened).value();
  ASSERT_TRUE(testing::is_ok(node->start()));
  std::thread control_loop([&] { node->run(); });

  // The control loop answers for the node: serving (the first watermark is durable).
  const Result<nlohmann::json> health = control::control_request(control_socket, "health", 5000);
  ASSERT_TRUE(health.ok()) << health.message();
  EXPECT_TRUE((*health)["healthy"].get<bool>()) << health->dump();

  // IDs across time: the clock moves before each round, so flurry-renew makes later
  // watermarks durable while the workers issue. A RETRY answer (the ceiling reached until the
  // next renewal) is asked again after a pause, as a client does; each round is bounded.
  std::set<std::uint64_t> seen;
  std::uint64_t time_max = 0;
  UdpClient client(port);
  constexpr std::size_t per_round = 5000;
  for (int round = 0; round < 5; ++round) {
    clock.advance_ms(400);
    std::size_t got = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (got < per_round && std::chrono::steady_clock::now() < deadline) {
      proto::Status status = proto::Status::ok;
      const std::vector<std::uint64_t> ids = client.get(500, &status);
      for (const std::uint64_t id : ids) {
        EXPECT_TRUE(seen.insert(id).second) << "ID " << id << " issued twice";
        time_max = std::max(time_max, config.id_layout.decode(id).time);
      }
      got += ids.size();
      if (ids.empty()) {
        ASSERT_EQ(status, proto::Status::retry) << "round " << round;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    ASSERT_GE(got, per_round) << "round " << round << ": the node stopped issuing";
  }

  // Drained (the operator's `flurryctl drain`, through the control loop): GET_IDS is answered
  // FENCED, so clients move to another server; the held watermark stays durable.
  const Result<nlohmann::json> drained = control::control_request(control_socket, "drain", 5000);
  ASSERT_TRUE(drained.ok()) << drained.message();
  EXPECT_EQ((*drained)["state"], "draining") << drained->dump();
  proto::Status status = proto::Status::ok;
  EXPECT_TRUE(client.get(10, &status).empty());
  EXPECT_EQ(status, proto::Status::fenced);

  node->stop_soon();
  control_loop.join();
  node->stop();
  const std::uint64_t durable_t = node->durable_watermark_t();
  node.reset();
  EXPECT_GE(durable_t, time_max);

  // What a power loss right now would leave on the disk: its watermark covers every ID.
  const std::string rebooted = dir.sub("rebooted");
  ASSERT_EQ(mkdir(rebooted.c_str(), 0700), 0);
  sim.materialize(rebooted, CrashSim::After::drop_volatile);
  persist::OpenOptions reopen;
  reopen.use_io_uring = false;
  auto store = persist::WatermarkStore::open(rebooted + "/state", control::identity_of(config), reopen);
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_GE((*store)->durable_watermark_t(), time_max)
      << "an ID was issued above the watermark a power loss would leave";
}

}  // namespace
}  // namespace flurry
