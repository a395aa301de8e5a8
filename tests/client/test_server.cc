// tests/client/test_server.cc — see test_server.h.
#include "tests/client/test_server.h"

#include <sodium.h>

#include <cstdlib>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

namespace flurry::client::testing {
namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "test server: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

int bind_loopback(std::uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) die("bind");
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) die("getsockname");
  *port = ntohs(address.sin_port);
  return fd;
}

// Sends one datagram to the peer of the request being served.
struct Reply {
  int fd;
  const sockaddr_in& peer;
  socklen_t peer_length;
  void operator()(const std::uint8_t* data, std::size_t length) const {
    ::sendto(fd, data, length, 0, reinterpret_cast<const sockaddr*>(&peer), peer_length);
  }
};

// Mode::hostile (test_server.h): the junk sent ahead of the real `answer` to `request`.
void send_hostile(const Reply& send, const proto::Request& request, std::span<const std::uint8_t> answer) {
  std::array<std::uint8_t, proto::datagram_size_max> junk{};
  const proto::Opcode opcode = request.opcode;
  const std::uint64_t request_id = request.request_id;
  const std::uint32_t count = request.count;
  // 1. Another request id: must be ignored (counted as ignored), never used. For
  // GET_IDS it carries fake IDs; otherwise it is the real answer with the id changed.
  proto::ResponseHeader header;
  header.opcode = opcode;
  header.status = proto::Status::ok;
  header.range_count = 1;
  header.request_id = request_id ^ 0x5555;
  std::size_t junk_size = 0;
  if (opcode == proto::Opcode::get_ids) {
    proto::encode_response_header(header, junk);
    proto::encode_range(junk, 0, proto::Range{1, std::min<std::uint32_t>(count, 5)});
    junk_size = proto::response_header_size + proto::range_size;
  } else {
    std::memcpy(junk.data(), answer.data(), answer.size());
    proto::store_be<std::uint64_t>(junk.data() + proto::response_offset::request_id, header.request_id);
    junk_size = answer.size();
  }
  send(junk.data(), junk_size);
  // 2. Truncations of the real answer: too short, and one byte short (bad length).
  send(answer.data(), 10);
  if (answer.size() > proto::response_header_size) {
    send(answer.data(), answer.size() - 1);
  } else {  // no body to cut: claim a range that is not there
    std::memcpy(junk.data(), answer.data(), answer.size());
    junk[proto::response_offset::range_count] = 1;
    send(junk.data(), answer.size());
  }
  // 3. Garbage.
  for (std::size_t i = 0; i < 64; ++i) junk[i] = static_cast<std::uint8_t>(i * 37 + 11);
  send(junk.data(), 64);
  // 4. Wrong version.
  std::memcpy(junk.data(), answer.data(), answer.size());
  junk[proto::response_offset::version] = proto::wire_version + 1;
  send(junk.data(), answer.size());
  // 5. Not a response (opcode without the response bit).
  std::memcpy(junk.data(), answer.data(), answer.size());
  junk[proto::response_offset::opcode] &= static_cast<std::uint8_t>(~proto::opcode_response_bit);
  send(junk.data(), answer.size());
  // 6. The right id, but more IDs than asked (fake ones).
  header.request_id = request_id;
  proto::encode_response_header(header, junk);
  proto::encode_range(junk, 0, proto::Range{1, count + 1});
  send(junk.data(), proto::response_header_size + proto::range_size);
  // 7. The right id, two overlapping ranges (one ID twice), within the count asked.
  header.range_count = 2;
  proto::encode_response_header(header, junk);
  proto::encode_range(junk, 0, proto::Range{1, 1});
  proto::encode_range(junk, 1, proto::Range{1, 1});
  send(junk.data(), proto::response_header_size + 2 * proto::range_size);
  // 8. The right id, an unknown status.
  header.range_count = 0;
  header.status = static_cast<proto::Status>(9);
  proto::encode_response_header(header, junk);
  send(junk.data(), proto::response_header_size);
}

}  // namespace

TestServer::TestServer(const ServerConfig& config) : config_(config), mode_(config.mode) {
  fd_ = bind_loopback(&port_);
  core::HandlerConfig handler_config;
  handler_config.layout = config.layout;
  handler_config.node_id = config.node_id;
  handler_config.retry_hint_us = config.retry_hint_us;
  if (config.auth) {
    if (sodium_init() < 0) std::abort();
    replay_ = std::make_unique<core::ReplayFilter>(1 << 16);
    core::Key key;
    key.id = test_key_id;
    key.secret = test_key_secret;
    key.opcodes = (1U << 1) | (1U << 3);
    keys_ = std::make_unique<core::KeyTable>(std::vector<core::Key>{key});
    handler_config.auth = core::AuthConfig{core::AuthMode::required, 5000, crypto_shorthash, replay_.get()};
  }
  if (!config.sequence.empty()) {
    sequences_ = std::make_unique<core::SequenceTable>(1);
    const auto mode = config.monotonic_owner ? core::SeqMode::monotonic : core::SeqMode::segment;
    const auto slot = sequences_->create(config.sequence, mode, 1);
    if (!slot) std::abort();
    sequence_slot_ = *slot;
    if (config.monotonic_owner) {
      set_sequence_owner(*config.monotonic_owner);
    } else if (!sequences_->push(*slot, 0, {1, std::uint64_t{1} << 40})) {
      std::abort();
    }
    handler_config.sequences = sequences_.get();
  }
  handler_ = std::make_unique<core::Handler>(handler_config, stats_);
  if (config.start_with_ceiling) raise_ceiling();
  thread_ = std::thread([this] { serve(); });
}

TestServer::~TestServer() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
  }
  changed_.notify_all();
  thread_.join();
  ::close(fd_);
}

void TestServer::set_sequence_owner(std::uint32_t owner, bool serve_if_mine) {
  if (owner != config_.node_id || !serve_if_mine) return sequences_->set_not_owner(sequence_slot_, owner);
  // Numbers from 1, or on from where this server stopped when it owned the sequence before.
  const std::uint64_t next = std::max<std::uint64_t>(1, sequences_->monotonic_next(sequence_slot_));
  sequences_->take_ownership(sequence_slot_, next);
  sequences_->raise_limit(sequence_slot_, std::uint64_t{1} << 40);
}

std::uint64_t TestServer::now_t() const {
  const auto unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  return config_.layout.time_from_unix_ms(static_cast<std::uint64_t>(unix_ms));
}

void TestServer::raise_ceiling() {
  // About three hours of 1 ms units: far more than any test borrows ahead.
  ceiling_.publish(now_t() + 10'000'000);
}

void TestServer::release_late() {
  {
    std::lock_guard lock(mutex_);
    late_released_ = true;
  }
  changed_.notify_all();
}

bool TestServer::await_answers_sent(std::uint64_t count, std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, limit, [&] { return answers_sent_ >= count; });
}

void TestServer::serve() {
  std::array<std::uint8_t, proto::datagram_size_max + 1> in{};
  std::array<std::uint8_t, proto::datagram_size_max> out{};
  while (!stop_.load()) {
    pollfd fd{fd_, POLLIN, 0};
    if (::poll(&fd, 1, 20) <= 0) continue;
    sockaddr_in peer{};
    socklen_t peer_length = sizeof peer;
    const ssize_t n =
        ::recvfrom(fd_, in.data(), in.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&peer), &peer_length);
    if (n < 0) continue;
    datagrams_in_.fetch_add(1);
    const Mode mode = mode_.load();
    const auto size = static_cast<std::size_t>(n);
    if (mode == Mode::mangle_version && size >= proto::request_header_size) {
      in[proto::request_offset::version] = proto::wire_version + 1;
    }
    if (mode == Mode::mangle_auth && size >= proto::request_header_size) {
      in[proto::request_offset::flags + 1] |= static_cast<std::uint8_t>(proto::flag_auth);
    }
    const proto::RequestView request = proto::decode_request(std::span(in.data(), size));
    {
      std::lock_guard lock(mutex_);
      seen_.push_back({request.request.request_id, ntohs(peer.sin_port)});
    }
    changed_.notify_all();
    const auto unix_ms = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        std::chrono::system_clock::now().time_since_epoch())
                                                        .count());
    const core::Burst burst{now_t(), ceiling_.load(), unix_ms, keys_.get()};
    std::size_t answer_size = handler_->handle(std::span(in.data(), size), out, burst);
    handler_->publish();
    if (answer_size == 0) continue;
    if (mode == Mode::strip_mac && answer_size >= proto::response_header_size + proto::answer_mac_size) {
      answer_size -= proto::answer_mac_size;
    }
    if (mode == Mode::flip_mac) out[answer_size - 1] ^= 0x01;
    const Reply send{fd_, peer, peer_length};
    if (mode == Mode::hostile) {
      send_hostile(send, request.request, std::span(out.data(), answer_size));
    }
    std::unique_lock lock(mutex_);
    if (mode == Mode::late) changed_.wait(lock, [this] { return late_released_ || stop_.load(); });
    send(out.data(), answer_size);
    ++answers_sent_;
    lock.unlock();
    changed_.notify_all();
  }
}

std::vector<TestServer::Seen> TestServer::seen() const {
  std::lock_guard lock(mutex_);
  return seen_;
}

bool TestServer::await_requests(std::uint64_t count, std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, limit, [&] { return seen_.size() >= count; });
}

DeadServer::DeadServer() { fd_ = bind_loopback(&port_); }

DeadServer::~DeadServer() { ::close(fd_); }

}  // namespace flurry::client::testing
