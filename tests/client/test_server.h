// tests/client/test_server.h — an in-process flurry server for the client tests.
//
// A UDP socket on 127.0.0.1, port 0 (ephemeral), served by one thread that runs the real
// request handler (core::Handler) with a ceiling the test controls: the server logic under
// test is the real one. Modes add misbehaviour around it (answers sent late, hostile junk sent
// before the real answer, requests mangled so the real handler rejects them).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/ceiling.h"
#include "core/handler.h"
#include "core/keys.h"
#include "core/sequence_table.h"
#include "proto/layout.h"

namespace flurry::client::testing {

enum class Mode : std::uint8_t {
  normal,
  // Before each real answer, send: an answer for another request id (with fake IDs below
  // fake_id_limit), the real answer truncated to 10 bytes and minus its last byte, garbage,
  // a wrong version, a datagram without the response bit, an answer with the right id but
  // more IDs than asked, one with overlapping ranges, and one with an unknown status.
  // hostile_malformed_per_request of them are malformed, one is for another request id.
  hostile,
  late,            // every answer is held until release_late(), then sent
  mangle_version,  // the request's version byte is changed: the handler answers BAD_REQUEST
  mangle_auth,     // the request's auth flag is set: the handler answers UNAUTHORIZED
  strip_mac,       // ServerConfig::auth: the signed answer is sent without its 8 MAC bytes
  flip_mac,        // ServerConfig::auth: the last byte of the answer MAC is flipped
};

// ServerConfig::auth: the one key the server knows (--auth required).
inline constexpr std::uint32_t test_key_id = 7;
inline constexpr std::array<std::uint8_t, 16> test_key_secret = {0, 1, 2,  3,  4,  5,  6,  7,
                                                                 8, 9, 10, 11, 12, 13, 14, 15};

inline constexpr std::uint64_t fake_id_limit = 1000;
inline constexpr std::uint64_t hostile_malformed_per_request = 8;

struct ServerConfig {
  proto::Layout layout{};
  std::uint32_t node_id = 1;
  std::uint32_t retry_hint_us = 1000;
  bool start_with_ceiling = true;  // false: ceiling 0, every GET_IDS is answered RETRY
  Mode mode = Mode::normal;
  bool auth = false;  // --auth required with the key test_key_id / test_key_secret
  // Non-empty: a segment sequence of this name served by GET_SEQ, numbers from 1 (one block
  // of 2^40 queued for the one worker).
  std::string sequence;
  // Set: the sequence is monotonic, served only while this is node_id; otherwise every GET_SEQ
  // is answered NOT_OWNER naming it (proto::not_owner_unknown: no owner known).
  std::optional<std::uint32_t> monotonic_owner;
};

class TestServer {
 public:
  explicit TestServer(const ServerConfig& config = {});
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Current time in layout units.
  std::uint64_t now_t() const;
  // Ceiling far above now (hours): nothing is held back.
  void raise_ceiling();
  void set_ceiling(std::uint64_t ceiling_t) { ceiling_.publish(ceiling_t); }
  void fence() { ceiling_.fence(); }
  void drain() { ceiling_.drain(); }
  void set_mode(Mode mode) { mode_.store(mode); }
  // ServerConfig::monotonic_owner: who owns the sequence from now on (this server when it is
  // config.node_id; it then issues numbers from 1, or on from where it stopped). With
  // `serve_if_mine` false it answers NOT_OWNER naming `owner` even when that is itself (a
  // restarted owner whose old owner key has not expired yet).
  void set_sequence_owner(std::uint32_t owner, bool serve_if_mine = true);

  std::uint64_t outcome(core::Outcome outcome) const { return stats_.get(outcome); }
  std::uint64_t datagrams_in() const { return datagrams_in_.load(); }
  // Each request received, in order: its request id and the client port it came from.
  struct Seen {
    std::uint64_t request_id = 0;
    std::uint16_t client_port = 0;
  };
  std::vector<Seen> seen() const;
  // Blocks up to `limit` of real time until `count` requests have been received.
  bool await_requests(std::uint64_t count, std::chrono::milliseconds limit);

  // Mode::late: sends the answers held so far and every later one at once.
  void release_late();
  // Blocks up to `limit` of real time until `count` answers have been sent (sendto returned);
  // true if they have.
  bool await_answers_sent(std::uint64_t count, std::chrono::milliseconds limit);

 private:
  void serve();

  ServerConfig config_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  core::Ceiling ceiling_;
  core::WorkerStats stats_;
  std::unique_ptr<core::ReplayFilter> replay_;
  std::unique_ptr<core::KeyTable> keys_;
  std::unique_ptr<core::SequenceTable> sequences_;
  std::size_t sequence_slot_ = 0;
  std::unique_ptr<core::Handler> handler_;
  std::atomic<Mode> mode_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> datagrams_in_{0};
  mutable std::mutex mutex_;  // guards the three below
  std::condition_variable changed_;
  bool late_released_ = false;
  std::uint64_t answers_sent_ = 0;  // real answers, not Mode::hostile's junk
  std::vector<Seen> seen_;
  std::thread thread_;
};

// A bound UDP socket on 127.0.0.1 that never reads or answers (a hung server).
class DeadServer {
 public:
  DeadServer();
  ~DeadServer();
  DeadServer(const DeadServer&) = delete;
  DeadServer& operator=(const DeadServer&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace flurry::client::testing
