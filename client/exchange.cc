// client/exchange.cc — see exchange.h for the contract.
#include "client/exchange.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <sodium.h>

#include "base/invariant.h"
#include "client/errors.h"
#include "proto/auth.h"

namespace flurry::client {
namespace {

// A conservative guess of how many IDs one range carries (a 12-bit sequence shared by 16
// workers, or js-safe's 11 bits shared by 8). It only sizes the request padding: a server with
// smaller slices answers with fewer IDs and the client asks again for the rest.
constexpr std::size_t ids_per_range_assumed = 256;

// Checks an answer that echoes the outstanding request's id against that request: the rules
// of proto/PROTOCOL.md "Response decoding" that need the request. decode_response has already
// checked everything else (status for the opcode, ranges only in OK GET_IDS answers, ranges
// nonempty, increasing, below 2^63).
bool consistent(const proto::ResponseView& view, const proto::Request& request) {
  if (view.header.opcode != request.opcode) return false;
  std::uint64_t ids = 0;
  for (std::size_t i = 0; i < view.header.range_count; ++i) ids += view.range(i).count;
  return ids <= request.count;  // never more IDs than asked
}

std::string times(std::size_t n) {
  return n == 1 ? std::string(" once") : " " + std::to_string(n) + " times";
}

}  // namespace

Exchange::RequestIds::RequestIds() { randombytes_buf(key_.data(), key_.size()); }

Exchange::RequestIds::~RequestIds() { sodium_memzero(key_.data(), key_.size()); }

std::uint64_t Exchange::RequestIds::next() {
  if (used_ == words_.size()) {
    static_assert(sizeof(words_) == 64 && crypto_stream_chacha20_KEYBYTES == 32 &&
                  crypto_stream_chacha20_NONCEBYTES == 8);
    std::array<unsigned char, crypto_stream_chacha20_NONCEBYTES> nonce{};
    std::memcpy(nonce.data(), &block_, sizeof block_);  // a new nonce for every 64 bytes
    ++block_;
    crypto_stream_chacha20(reinterpret_cast<unsigned char*>(words_.data()), sizeof words_, nonce.data(),
                           key_.data());
    used_ = 0;
  }
  return words_[used_++];
}

Exchange::Exchange(const Options& options, Transport& transport, Clock& clock)
    : options_(options), transport_(transport), clock_(clock) {
  failures_.reserve(options.attempts);
  server_node_.assign(options.servers.size(), node_unknown);  // the transport opens one each
}

bool Exchange::run(proto::Opcode opcode, std::uint32_t count, std::size_t padded_size, Error* error) {
  failures_.clear();
  unsigned_refusal_ = 0;
  heard_.assign(server_node_.size(), false);
  Clock::duration retry_waited{0};
  unsigned attempt = 0;
  while (attempt < options_.attempts) {
    switch (attempt_step(opcode, count, padded_size, retry_waited, error)) {
      case Step::answered:
        return true;
      case Step::failed:
        return false;
      case Step::same_server:
        continue;  // after RETRY: the attempt is not used up
      case Step::resign:
        continue;               // signed again for the node the server named: not used up
      case Step::other_server:  // after a wait for an owner: the attempt is not used up
        current_ = (current_ + 1) % transport_.server_count();
        continue;
      case Step::next_server:
        current_ = (current_ + 1) % transport_.server_count();
        ++attempt;
        continue;
      case Step::owner_server:
        current_ = owner_server_;
        ++attempt;
        continue;
    }
  }
  fail_attempts(error);
  return false;
}

// Sends one request to the current server and waits for its answer.
Exchange::Step Exchange::attempt_step(proto::Opcode opcode, std::uint32_t count, std::size_t padded_size,
                                      Clock::duration& retry_waited, Error* error) {
  const std::size_t server = current_;
  proto::Request request;
  request.opcode = opcode;
  request.count = count;
  request.request_id = request_ids_.next();
  if (opcode == proto::Opcode::get_seq) request.name = seq_name_;
  const std::size_t size = encode(request, server, padded_size);
  const Clock::time_point sent = clock_.now();
  bump(Count::requests);
  if (const int err = transport_.send(server, std::span(send_buffer_.data(), size)); err != 0) {
    bump(Count::send_errors);
    failures_.push_back({Failure::send_failed, server, err});
    if (clock_.sleep_until(clock_.now() + send_failure_pause, transport_.wake_fd())) {
      return Step::next_server;
    }
    shutting_down(error);
    return Step::failed;
  }
  switch (await(request, sent + options_.timeout)) {
    case Wait::shutdown:
      shutting_down(error);
      return Step::failed;
    case Wait::timeout:
      bump(Count::timeouts);
      failures_.push_back({Failure::timeout, server, 0});
      return Step::next_server;
    case Wait::answer:
      break;
  }
  bump(Count::responses);
  answer_.server = server;
  note_node(server);
  return on_answer(opcode, sent, retry_waited, error);
}

Exchange::Step Exchange::on_answer(proto::Opcode opcode, Clock::time_point sent,
                                   Clock::duration& retry_waited, Error* error) {
  const bool wrong_server =
      answer_.header.status == proto::Status::unauthorized &&
      answer_.header.detail == static_cast<std::uint32_t>(proto::RequestError::wrong_server);
  if (!wrong_server) resigned_ = 0;
  switch (answer_.header.status) {
    case proto::Status::ok:
      rtt_ = answer_.received - sent;
      return Step::answered;
    case proto::Status::retry:
      return on_retry(retry_waited, error);
    case proto::Status::fenced:
      bump(Count::fenced);
      failures_.push_back(
          {answer_.header.detail == proto::fenced_draining ? Failure::draining : Failure::fenced,
           answer_.server, 0});
      return Step::next_server;
    case proto::Status::unauthorized:
      // Signed for a node id this server does not serve (the first request to it, or the node
      // moved): the verified answer named its node (note_node), so sign again for it, once or
      // twice; a server that keeps naming another node is refused as any UNAUTHORIZED.
      if (wrong_server && options_.key && resigned_ < 2) {
        ++resigned_;
        return Step::resign;
      }
      reject(opcode, error);
      return Step::failed;
    case proto::Status::bad_request:
      reject(opcode, error);
      return Step::failed;
    case proto::Status::exhausted:
      set_error(error, ErrorCode::exhausted,
                transport_.name(answer_.server) + " answered EXHAUSTED to " +
                    std::string(proto::to_string(opcode)) +
                    (opcode == proto::Opcode::get_seq
                         ? ": the sequence '" + std::string(seq_name_.view()) +
                               "' has reached 2^63 and can issue no number again"
                         : std::string(": the ID layout's time field has run out (its last instant has "
                                       "passed): no server of this layout can issue IDs again; a new "
                                       "layout or epoch is needed")));
      return Step::failed;
    case proto::Status::unknown_sequence:
      reject_seq(error);
      return Step::failed;
    case proto::Status::not_owner:
      return on_not_owner(retry_waited, error);
  }
  // consistent() admits no other status: a broken invariant, not bad input.
  FLURRY_INVARIANT(false, "the client accepted an answer with an unknown status");
  std::abort();  // not reached
}

// Sleeps the server's hint (bounded) unless the budget would be exceeded.
Exchange::Step Exchange::on_retry(Clock::duration& retry_waited, Error* error) {
  bump(Count::retries);
  const Clock::duration wait_for = std::clamp<Clock::duration>(
      std::chrono::microseconds{answer_.header.detail}, retry_wait_min, options_.retry_wait_max);
  if (retry_waited + wait_for > options_.retry_budget) {
    const auto waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(retry_waited);
    set_error(error, ErrorCode::retry_exhausted,
              transport_.name(answer_.server) + " kept answering RETRY for " +
                  std::to_string(waited_ms.count()) + " ms (budget " +
                  std::to_string(options_.retry_budget.count()) +
                  " ms): its issue ceiling is not rising; is its watermark store or "
                  "etcd stalled?");
    return Step::failed;
  }
  if (!clock_.sleep_until(clock_.now() + wait_for, transport_.wake_fd())) {
    shutting_down(error);
    return Step::failed;
  }
  retry_waited += wait_for;
  return Step::same_server;
}

// Records the node a server answered as. A FENCED server still names the node id it lost, which
// may be another server's now: it serves as no node, and is not heard as one. A node id answered
// by one server is no longer another's (node ids move between processes after a fence). A signed
// client takes only verified answers (accept()), so no one else can move a node id it signs for.
void Exchange::note_node(std::size_t server) {
  if (answer_.header.status == proto::Status::fenced) {
    server_node_[server] = node_unknown;
    return;
  }
  heard_[server] = true;
  const std::uint32_t node = answer_.header.node;
  for (std::uint32_t& known : server_node_) {
    if (known == node) known = node_unknown;
  }
  server_node_[server] = node;
}

// NOT_OWNER: ask the owner it names if a server has answered as that node, else the next
// server (an unheard server may be the named one). No owner known, or the answering server
// naming its own node (its old owner key lives until its old lease ends), is a move under
// way: wait for it as for RETRY, within the same budget, and ask the next server.
Exchange::Step Exchange::on_not_owner(Clock::duration& retry_waited, Error* error) {
  const std::uint32_t owner = answer_.header.detail;
  failures_.push_back({Failure::not_owner, answer_.server, 0, owner});
  if (owner == proto::not_owner_unknown || owner == answer_.header.node) {
    if (retry_waited + owner_move_wait > options_.retry_budget) return Step::next_server;
    if (!clock_.sleep_until(clock_.now() + owner_move_wait, transport_.wake_fd())) {
      shutting_down(error);
      return Step::failed;
    }
    retry_waited += owner_move_wait;
    return Step::other_server;
  }
  for (std::size_t server = 0; server < server_node_.size(); ++server) {
    if (server_node_[server] == owner && server != answer_.server) {
      owner_server_ = server;
      return Step::owner_server;
    }
  }
  // Given up only on what this call heard: an earlier call's record of a server may be stale.
  if (std::find(heard_.begin(), heard_.end(), false) != heard_.end()) return Step::next_server;
  reject_seq(error);  // the owner is none of this client's servers
  return Step::failed;
}

// BAD_REQUEST or UNAUTHORIZED: another server would reject the same request, so none is tried.
void Exchange::reject(proto::Opcode opcode, Error* error) const {
  const proto::ResponseHeader& header = answer_.header;
  const bool bad = header.status == proto::Status::bad_request;
  const std::string_view reason = header.detail <= 0xff
                                      ? proto::to_string(static_cast<proto::RequestError>(header.detail))
                                      : std::string_view("unknown");
  const auto error_number = static_cast<proto::RequestError>(header.detail <= 0xff ? header.detail : 0);
  std::string why;
  if (bad) {
    why = ": the server rejects this request; is the client built for another wire version?";
  } else if (!options_.key) {
    why = ": this server requires authentication; give the client a key (flurry get --key-file FILE)";
  } else if (error_number == proto::RequestError::stale_timestamp) {
    why =
        ": this client's clock is further from the server's than its window allows, or the server "
        "started (or took its node id) after the request was signed: check both clocks (NTP)";
  } else if (error_number == proto::RequestError::wrong_server) {
    why = ": the server kept naming another node id than the one the request was signed for";
  } else {
    why = ": the key is not allowed this request (see flurryctl keys list)";
  }
  set_error(error, bad ? ErrorCode::bad_request : ErrorCode::unauthorized,
            transport_.name(answer_.server) + " answered " + std::string(proto::to_string(header.status)) +
                " (" + std::string(reason) + ") to " + std::string(proto::to_string(opcode)) + why);
}

// UNKNOWN_SEQUENCE or NOT_OWNER: asking this server again gets the same answer.
void Exchange::reject_seq(Error* error) const {
  const proto::ResponseHeader& header = answer_.header;
  const std::string name(seq_name_.view());
  if (header.status == proto::Status::unknown_sequence) {
    set_error(error, ErrorCode::unknown_sequence,
              transport_.name(answer_.server) + " has no sequence '" + name + "' (flurryctl seq create " +
                  name + ")");
    return;
  }
  set_error(error, ErrorCode::not_owner,
            transport_.name(answer_.server) + " does not serve the monotonic sequence '" + name + "': " +
                (header.detail == proto::not_owner_unknown
                     ? std::string("no owner is known now")
                     : "node " + std::to_string(header.detail) +
                           " does, and none of this client's servers answers as that node (add it to the "
                           "server list)"));
}

// Waits until the answer to `request` arrives (into answer_), the deadline passes, or the
// transport is woken. Everything else that arrives is counted and dropped.
Exchange::Wait Exchange::await(const proto::Request& request, Clock::time_point deadline) {
  // Options::poll: look without sleeping until then (real time: it is CPU spent, not a wait).
  const bool polling = poll_answers_ && options_.poll.count() != 0;
  const auto poll_until =
      polling ? std::chrono::steady_clock::now() + options_.poll : std::chrono::steady_clock::time_point{};
  const std::size_t server = current_;  // the socket connected to the server asked
  for (;;) {
    while (const std::optional<std::size_t> n = transport_.receive(server, receive_buffer_)) {
      if (accept(std::span<const std::uint8_t>(receive_buffer_.data(), *n), request)) {
        answer_.received = clock_.now();
        return Wait::answer;
      }
    }
    if (clock_.now() >= deadline) return Wait::timeout;
    if (polling && !transport_.woken() && std::chrono::steady_clock::now() < poll_until) continue;
    std::array<pollfd, 2> fds{{{transport_.socket_fd(server), POLLIN, 0}, {transport_.wake_fd(), POLLIN, 0}}};
    if (!clock_.wait_until(deadline, fds)) continue;  // drain once more, then time out
    if ((fds[1].revents & POLLIN) != 0) return Wait::shutdown;
    if ((fds[0].revents & POLLERR) != 0) transport_.clear_socket_error(server);
  }
}

// Unsigned: the padded request. Signed: 3 bytes more than that (3x of them pays for the 8-byte
// answer MAC), at least 44, ending with the trailer: signed for the node id `server` last
// answered as (any_server until it has: PING and INFO are served, GET_IDS and GET_SEQ answered
// wrong_server naming it), stamped with the wall clock.
std::size_t Exchange::encode(const proto::Request& request, std::size_t server, std::size_t padded_size) {
  if (!options_.key) return proto::encode_request(request, send_buffer_, padded_size);
  const std::size_t size =
      std::clamp(padded_size + 3, proto::signed_request_size_min, proto::datagram_size_max);
  const auto stamp_us = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                       std::chrono::system_clock::now().time_since_epoch())
                                                       .count());
  const std::uint32_t node = server_node_[server] == node_unknown ? proto::any_server : server_node_[server];
  const std::size_t written = proto::encode_signed_request(
      request, send_buffer_, size, options_.key->id, node, stamp_us, options_.key->secret, crypto_shorthash);
  request_mac_ = proto::load_be<std::uint64_t>(send_buffer_.data() + written - proto::answer_mac_size);
  return written;
}

bool Exchange::verified(std::span<const std::uint8_t>* datagram, const proto::Request& request) {
  if (proto::verify_answer(*datagram, request_mac_, options_.key->secret, crypto_shorthash)) {
    *datagram = datagram->first(datagram->size() - proto::answer_mac_size);
    return true;
  }
  bump(Count::unverified_responses);
  // Remembered for the error message only: anyone on the path could have sent it.
  const proto::ResponseView view = proto::decode_response(*datagram);
  if (view.error == proto::ResponseError::ok && view.header.request_id == request.request_id &&
      view.header.status == proto::Status::unauthorized) {
    unsigned_refusal_ = view.header.detail;
  }
  return false;
}

// Classifies one received datagram; true if it is the answer to `request`.
bool Exchange::accept(std::span<const std::uint8_t> datagram, const proto::Request& request) {
  if (options_.key && !verified(&datagram, request)) return false;
  const proto::ResponseView view = proto::decode_response(datagram);
  if (view.error != proto::ResponseError::ok) {
    bump(Count::malformed_responses);
    return false;
  }
  if (view.header.request_id != request.request_id) {
    bump(Count::ignored_responses);  // late answer to an earlier attempt, or foreign
    return false;
  }
  if (!consistent(view, request)) {
    bump(Count::malformed_responses);
    return false;
  }
  answer_.header = view.header;
  if (view.header.status == proto::Status::ok) {
    if (request.opcode == proto::Opcode::info) answer_.info = view.info();
    for (std::size_t i = 0; i < view.header.range_count; ++i) answer_.ranges[i] = view.range(i);
  }
  return true;
}

std::string Exchange::timeout_text() const { return std::to_string(options_.timeout.count()) + " ms"; }

// The attempts ran out: name every server that failed, in order of first failure.
void Exchange::fail_attempts(Error* error) const {
  const std::string attempts_text =
      std::to_string(options_.attempts) + (options_.attempts == 1 ? " attempt" : " attempts");
  bool all_timeouts = true;
  bool any_fenced = false;
  bool any_draining = false;
  bool any_not_owner = false;
  std::vector<std::size_t> order;
  for (const Failure& failure : failures_) {
    all_timeouts = all_timeouts && failure.kind == Failure::timeout;
    any_fenced = any_fenced || failure.kind == Failure::fenced;
    any_draining = any_draining || failure.kind == Failure::draining;
    any_not_owner = any_not_owner || failure.kind == Failure::not_owner;
    if (std::find(order.begin(), order.end(), failure.server) == order.end()) {
      order.push_back(failure.server);
    }
  }
  if (unsigned_refusal_ != 0) {  // attempts ran out after an unverifiable refusal: name it
    const std::string reason(unsigned_refusal_ <= 0xff
                                 ? proto::to_string(static_cast<proto::RequestError>(unsigned_refusal_))
                                 : std::string_view("unknown"));
    set_error(error, ErrorCode::unauthorized,
              "no verifiable answer after " + attempts_text + "; an unsigned UNAUTHORIZED (" + reason +
                  ") came back, which a signed client cannot trust: check the key id, secret and clock");
    return;
  }
  if (all_timeouts) {
    std::string names;
    for (std::size_t server : order) names += (names.empty() ? "" : ", ") + transport_.name(server);
    // A signed request naming a key the server lacks, or with a wrong secret, is dropped
    // unanswered (PROTOCOL.md: no oracle): from here that looks like silence.
    set_error(error, ErrorCode::no_answer,
              "no answer from " + names + " after " + attempts_text + " of " + timeout_text() +
                  (options_.key ? " (a server drops signed requests whose key id it does not know or whose "
                                  "MAC does not verify: check the key id and secret, flurryctl keys list)"
                                : ""));
    return;
  }
  std::string text = "no server could serve the request after " + attempts_text + ":";
  for (std::size_t server : order) text += " " + describe_failures(server) + ";";
  text.pop_back();
  // NOT_OWNER says most: the sequence is served, just not by the servers that answered.
  set_error(error,
            any_not_owner  ? ErrorCode::not_owner
            : any_fenced   ? ErrorCode::fenced
            : any_draining ? ErrorCode::draining
                           : ErrorCode::no_answer,
            std::move(text));
}

// e.g. "10.0.0.1:7420 answered FENCED once (it lost its node id), gave no answer within
// 100 ms 2 times".
std::string Exchange::describe_failures(std::size_t server) const {
  std::size_t timeouts = 0;
  std::size_t fenced = 0;
  std::size_t draining = 0;
  std::size_t send_failed = 0;
  std::size_t not_owner = 0;
  std::uint32_t owner = proto::not_owner_unknown;
  int err = 0;
  for (const Failure& failure : failures_) {
    if (failure.server != server) continue;
    if (failure.kind == Failure::timeout) ++timeouts;
    if (failure.kind == Failure::fenced) ++fenced;
    if (failure.kind == Failure::draining) ++draining;
    if (failure.kind == Failure::not_owner) {
      ++not_owner;
      owner = failure.owner;
    }
    if (failure.kind == Failure::send_failed) {
      ++send_failed;
      err = failure.err;
    }
  }
  std::string text = transport_.name(server);
  std::string sep;
  if (fenced > 0) {
    text += " answered FENCED" + times(fenced) + " (it holds no node id: lost, or not yet claimed)";
    sep = ",";
  }
  if (draining > 0) {
    text += sep + " answered FENCED" + times(draining) + " (draining: its operator is stopping it)";
    sep = ",";
  }
  if (not_owner > 0) {
    text += sep + " answered NOT_OWNER" + times(not_owner) + " (" +
            (owner == proto::not_owner_unknown ? std::string("no owner known")
                                               : "node " + std::to_string(owner) + " serves it") +
            ")";
    sep = ",";
  }
  if (timeouts > 0) {
    text += sep + " gave no answer within " + timeout_text() + times(timeouts);
    sep = ",";
  }
  if (send_failed > 0) {
    text += sep + " could not be sent to (" + errno_text(err) + ")" + times(send_failed);
  }
  return text;
}

bool Exchange::fetch(std::size_t n, std::vector<proto::Range>& out, Error* error) {
  return fetch_opcode(proto::Opcode::get_ids, n, out, error);
}

bool Exchange::fetch_seq(std::string_view name, std::size_t n, std::vector<proto::Range>& out, Error* error) {
  seq_name_ = proto::SeqName{};
  std::copy(name.begin(), name.end(), seq_name_.bytes.begin());
  seq_name_.size = static_cast<std::uint8_t>(name.size());
  return fetch_opcode(proto::Opcode::get_seq, n, out, error);
}

bool Exchange::fetch_opcode(proto::Opcode opcode, std::size_t n, std::vector<proto::Range>& out,
                            Error* error) {
  const std::size_t original = out.size();
  std::size_t remaining = n;
  while (remaining > 0) {
    const auto count = static_cast<std::uint32_t>(std::min<std::size_t>(remaining, options_.ids_per_request));
    // Padding that lets the answer carry enough ranges for `count` IDs.
    const std::size_t padded_size = proto::request_size_for_ids(count, ids_per_range_assumed);
    if (!run(opcode, count, padded_size, error)) {
      out.resize(original);
      return false;
    }
    std::uint64_t ids = 0;
    for (std::size_t i = 0; i < answer_.header.range_count; ++i) {
      out.push_back(answer_.ranges[i]);
      ids += answer_.ranges[i].count;
    }
    bump(Count::ids_received, ids);
    remaining -= ids;  // consistent() guarantees ids <= count <= remaining
  }
  return true;
}

std::uint64_t Counters::*Exchange::member_of(Count count) {
  switch (count) {
    case Count::requests:
      return &Counters::requests;
    case Count::responses:
      return &Counters::responses;
    case Count::retries:
      return &Counters::retries;
    case Count::timeouts:
      return &Counters::timeouts;
    case Count::fenced:
      return &Counters::fenced;
    case Count::ignored_responses:
      return &Counters::ignored_responses;
    case Count::malformed_responses:
      return &Counters::malformed_responses;
    case Count::send_errors:
      return &Counters::send_errors;
    case Count::ids_received:
      return &Counters::ids_received;
    case Count::unverified_responses:
      return &Counters::unverified_responses;
    case Count::count_:
      break;
  }
  std::abort();  // Count::count_ is not a counter
}

void Exchange::report(Counters& out) const {
  for (std::size_t i = 0; i < counters_.size(); ++i) {
    out.*member_of(static_cast<Count>(i)) = counters_[i].load(std::memory_order_relaxed);
  }
}

}  // namespace flurry::client
