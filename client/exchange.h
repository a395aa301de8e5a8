// client/exchange.h — internal: one request/answer with failover, RETRY back-off and answer
// validation, over a Transport, timed by a Clock.
//
// Contract (client.h states it for users):
//   * Every datagram sent carries a fresh, unpredictable request id (a ChaCha20 keystream keyed
//     from the system's random source), and goes out on the socket connected to its server, so
//     an answer is read only from the server asked. An answer is accepted only if it passes
//     proto::decode_response, echoes the outstanding request id and is consistent with the
//     request (same opcode, never more IDs than asked); anything else is counted
//     (ignored_responses, malformed_responses) and dropped, so a late answer to an earlier
//     attempt is never taken for the current one.
//   * RETRY sleeps the server's hint, clamped to retry_wait_min..Options::retry_wait_max, and
//     asks the same server again without using an attempt, until Options::retry_budget of
//     sleeping would be exceeded (retry_exhausted). A timeout, a failed send and FENCED use an
//     attempt and move to the next server. BAD_REQUEST and UNAUTHORIZED end the exchange, but
//     for a signed UNAUTHORIZED wrong_server: the answer (verified) names the server's node id,
//     the request is signed again for it and sent to the same server at once, without using
//     an attempt (twice at most in a row). EXHAUSTED ends the exchange (exhausted): no server
//     can ever issue those IDs again.
//   * NOT_OWNER (GET_SEQ of a monotonic sequence another node serves) uses an attempt and asks
//     the server last heard answering as the named node (every accepted answer's header names
//     its node; FENCED answers do not count), else the next server, whose answer teaches its
//     node; when every server answered during this exchange and none is the owner (or the
//     attempts run out) the exchange fails not_owner. With no owner known (or a server naming
//     itself: a move under way) it waits owner_move_wait, within Options::retry_budget, and
//     asks the next server without using an attempt. UNKNOWN_SEQUENCE ends the exchange.
//   * Every wait goes through the Clock and ends at once when the transport is woken
//     (shutting_down).
//   * Not thread-safe: the caller serializes run() and fetch() (Client::Impl::io_mutex).
//     report() may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/clock.h"
#include "client/transport.h"
#include "proto/wire.h"

namespace flurry::client {

// A RETRY hint of 0 must not turn into a busy loop.
inline constexpr std::chrono::microseconds retry_wait_min{50};
// After a send that fails at once (no route), so the attempts are not spun through.
inline constexpr std::chrono::milliseconds send_failure_pause{1};
// NOT_OWNER with no owner known: a sequence's owner is settled within a second or so (the
// servers' sync period), so ask again after this, within Options::retry_budget.
inline constexpr std::chrono::milliseconds owner_move_wait{50};

class Exchange {
 public:
  // An accepted answer to the outstanding request.
  struct Answer {
    proto::ResponseHeader header;
    std::array<proto::Range, proto::ranges_max(proto::datagram_size_max)> ranges{};
    proto::Info info;
    Clock::time_point received;
    std::size_t server = 0;  // index into the transport's servers
  };

  // `options`, `transport` and `clock` must outlive the Exchange.
  Exchange(const Options& options, Transport& transport, Clock& clock);

  // One exchange; on success the accepted answer (status OK) is answer() and its round-trip
  // time rtt(). Errors: no_answer, fenced, retry_exhausted, bad_request, unauthorized,
  // shutting_down.
  bool run(proto::Opcode opcode, std::uint32_t count, std::size_t padded_size, Error* error);
  // Appends GET_IDS ranges holding exactly n IDs (asking again after partial answers), or
  // nothing. Errors: those of run().
  bool fetch(std::size_t n, std::vector<proto::Range>& out, Error* error);
  // The same for GET_SEQ of the sequence `name` (valid: proto::valid_seq_name). Errors: those
  // of run(), unknown_sequence, not_owner.
  bool fetch_seq(std::string_view name, std::size_t n, std::vector<proto::Range>& out, Error* error);

  // Options::poll applies to waits of the calling application thread only: the prefetch
  // threads turn it off around their refills (no one waits on them). Caller holds the
  // exchange's mutex.
  void poll_answers(bool on) { poll_answers_ = on; }

  const Answer& answer() const { return answer_; }
  Clock::duration rtt() const { return rtt_; }
  // Fills every counter of `out` but the prefetch ones.
  void report(Counters& out) const;

 private:
  enum class Step : std::uint8_t {
    answered,
    same_server,
    resign,
    next_server,
    other_server,
    owner_server,
    failed
  };
  enum class Wait : std::uint8_t { answer, timeout, shutdown };
  // Why one attempt failed, for the error message.
  struct Failure {
    enum Kind : std::uint8_t { timeout, fenced, draining, send_failed, not_owner } kind = timeout;
    std::size_t server = 0;
    int err = 0;              // send_failed: errno
    std::uint32_t owner = 0;  // not_owner: the node named, or proto::not_owner_unknown
  };
  // Unpredictable request ids: a ChaCha20 keystream (libsodium), keyed once from the system's
  // random source, 8 bytes an id; no system call per request.
  class RequestIds {
   public:
    RequestIds();
    ~RequestIds();
    RequestIds(const RequestIds&) = delete;
    RequestIds& operator=(const RequestIds&) = delete;
    std::uint64_t next();

   private:
    std::array<unsigned char, 32> key_{};
    std::uint64_t block_ = 0;
    std::array<std::uint64_t, 8> words_{};
    std::size_t used_ = 8;
  };
  // What report() copies into the public Counters, one atomic each; member_of() binds each
  // to its field with a switch, so -Wswitch catches one that is forgotten.
  enum class Count : std::uint8_t {
    requests,
    responses,
    retries,
    timeouts,
    fenced,
    ignored_responses,
    malformed_responses,
    send_errors,
    ids_received,
    unverified_responses,
    count_,
  };
  static std::uint64_t Counters::*member_of(Count count);
  void bump(Count count, std::uint64_t n = 1) {
    counters_[static_cast<std::size_t>(count)].fetch_add(n, std::memory_order_relaxed);
  }

  Step attempt_step(proto::Opcode opcode, std::uint32_t count, std::size_t padded_size,
                    Clock::duration& retry_waited, Error* error);
  Step on_answer(proto::Opcode opcode, Clock::time_point sent, Clock::duration& retry_waited, Error* error);
  Step on_retry(Clock::duration& retry_waited, Error* error);
  Step on_not_owner(Clock::duration& retry_waited, Error* error);
  void note_node(std::size_t server);
  void reject(proto::Opcode opcode, Error* error) const;
  void reject_seq(Error* error) const;
  bool fetch_opcode(proto::Opcode opcode, std::size_t n, std::vector<proto::Range>& out, Error* error);
  Wait await(const proto::Request& request, Clock::time_point deadline);
  bool accept(std::span<const std::uint8_t> datagram, const proto::Request& request);
  // Options::key: checks the answer MAC; on success *datagram loses its last 8 bytes.
  bool verified(std::span<const std::uint8_t>* datagram, const proto::Request& request);
  std::size_t encode(const proto::Request& request, std::size_t server, std::size_t padded_size);
  void fail_attempts(Error* error) const;
  std::string describe_failures(std::size_t server) const;
  std::string timeout_text() const;

  const Options& options_;
  Transport& transport_;
  Clock& clock_;
  std::size_t current_ = 0;       // the server asked first; moves on timeout, failed send, FENCED, NOT_OWNER
  std::size_t owner_server_ = 0;  // Step::owner_server: where NOT_OWNER pointed
  // The node each server last answered as (its header's node), node_unknown until it answers.
  static constexpr std::uint32_t node_unknown = 0xFFFFFFFF;
  std::vector<std::uint32_t> server_node_;
  std::vector<bool> heard_;  // which servers answered during the current exchange
  RequestIds request_ids_;
  unsigned resigned_ = 0;  // wrong_server answers in a row (a signed client learns the node)
  std::array<std::uint8_t, proto::datagram_size_max> send_buffer_{};
  // One byte more than any valid datagram, so an oversize one is seen as such.
  std::array<std::uint8_t, proto::datagram_size_max + 1> receive_buffer_{};
  Answer answer_;
  bool poll_answers_ = true;
  std::uint64_t request_mac_ = 0;       // of the signed request outstanding (Options::key)
  std::uint32_t unsigned_refusal_ = 0;  // RequestError of the last unsigned UNAUTHORIZED, 0: none
  proto::SeqName seq_name_;             // what GET_SEQ requests carry
  Clock::duration rtt_{0};              // of answer_, from the send of the attempt it answered
  std::vector<Failure> failures_;       // of the current exchange, for its error message
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Count::count_)> counters_{};
};

}  // namespace flurry::client
