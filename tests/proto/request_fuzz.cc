// tests/proto/request_fuzz.cc — libFuzzer target for the packet entry points
// (CONTRIBUTING.md, untrusted input):
// every input is one datagram, fed to core::Handler::handle (which calls decode_request) and to
// proto::decode_response. Built only with clang (-fsanitize=fuzzer,address,undefined); run
// with scripts/fuzz. Any broken invariant aborts, which libFuzzer reports as a crash:
//   * every datagram is counted exactly once: rx +1, exactly one terminal outcome +1, and
//     one reason counter +1 exactly when decode_request reports an error;
//   * the answer is at most proto::response_size_max(datagram size), decodes as a response
//     to this request (same request id), and is empty exactly when the datagram is dropped;
//   * issued IDs decode to this node and core and never exceed the burst's ceiling;
//   * answering in place (out aliases in) gives the same bytes;
//   * a datagram that decodes as a request or a response re-encodes to the same bytes (a signed
//     request: up to its trailer, and the trailer's fields are what its bytes say);
//   * authentication (PROTOCOL.md "Authentication"): the input raw, and the input signed here
//     with the fuzz key (so the fuzzer reaches the checks after the MAC: replay, permission,
//     batch, rate), go to a handler with --auth required: counted once, the answer within
//     its allowance, a signed answer verifies, no ID without a verified MAC.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include <sodium.h>

#include "core/ceiling.h"
#include "core/handler.h"
#include "core/keys.h"
#include "proto/auth.h"
#include "proto/layout.h"
#include "proto/wire.h"

namespace {

using namespace flurry;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "request_fuzz: invariant broken: %s\n", what);
    std::abort();
  }
}

constexpr std::uint64_t t0 = 31'622'400'000ULL;
constexpr std::uint32_t node_id = 5;
constexpr std::uint32_t core_index = 1;

core::HandlerConfig fuzz_config() {
  core::HandlerConfig config;
  config.layout.core_bits = 1;
  config.node_id = node_id;
  config.core = core_index;
  config.workers = 2;
  config.retry_hint_us = 1000;
  return config;
}

// Every way a datagram can end, GET_SEQ's two included (this handler has no sequence table:
// a well-formed GET_SEQ is answered UNKNOWN_SEQUENCE).
constexpr core::Outcome terminal_outcomes[] = {
    core::Outcome::answered_ok,
    core::Outcome::answered_retry,
    core::Outcome::answered_fenced,
    core::Outcome::answered_bad_request,
    core::Outcome::answered_unauthorized,
    core::Outcome::dropped,
    core::Outcome::answered_unknown_sequence,
    core::Outcome::answered_not_owner,
};

std::uint64_t terminal_total(const core::WorkerStats& stats) {
  std::uint64_t total = 0;
  for (core::Outcome o : terminal_outcomes) total += stats.get(o);
  return total;
}
std::uint64_t reasons_total(const core::WorkerStats& stats) {
  std::uint64_t total = 0;
  for (const auto& counter : stats.request_errors) total += counter.get();
  return total;
}

void check_answer(std::span<const std::uint8_t> in, std::span<const std::uint8_t> answer,
                  const proto::RequestView& request, const core::Burst& burst) {
  check(answer.size() <= proto::response_size_max(in.size()), "answer above response_size_max");
  check(answer.size() <= proto::amplification_max * in.size(), "answer above 3x the request");
  const bool answered = request.error == proto::RequestError::ok || proto::is_answered(request.error);
  check(answered == !answer.empty(), "answered exactly when the request is answerable");
  if (answer.empty()) return;
  const proto::ResponseView view = proto::decode_response(answer);
  check(view.error == proto::ResponseError::ok, "the answer decodes as a response");
  check(view.header.request_id == request.request.request_id, "the request id is echoed");
  check(view.header.node == node_id, "the answer names this node");
  if (request.error != proto::RequestError::ok) {
    check(view.header.detail == static_cast<std::uint32_t>(request.error), "detail is the reason");
    check(view.header.range_count == 0, "an error carries no ranges");
    return;
  }
  if (view.header.status != proto::Status::ok || request.request.opcode != proto::Opcode::get_ids) {
    return;
  }
  const proto::Layout layout = fuzz_config().layout;
  std::uint64_t ids = 0;
  for (std::size_t i = 0; i < view.header.range_count; ++i) {
    const proto::Range range = view.range(i);
    check(range.count > 0, "no empty ranges");
    const proto::Decoded first = layout.decode(range.first);
    check(first.node == node_id && first.core == core_index, "IDs of this node and core");
    check(first.time <= burst.ceiling_t, "never above the ceiling");
    check(std::uint64_t{first.counter} + range.count <= layout.counter_capacity(),
          "a range stays inside its time unit");
    ids += range.count;
  }
  check(ids >= 1 && ids <= request.request.count, "between 1 and count IDs");
}

void fuzz_handler(std::span<const std::uint8_t> in, const core::Burst& burst) {
  proto::RequestView request = proto::decode_request(in);
  // This handler runs with --auth off: a well-formed signed request is auth_unsupported.
  if (request.error == proto::RequestError::ok && (request.request.flags & proto::flag_auth) != 0) {
    request.error = proto::RequestError::auth_unsupported;
  }
  core::WorkerStats stats;
  core::Handler handler(fuzz_config(), stats);
  handler.start_above(t0 - 1);
  static std::array<std::uint8_t, proto::datagram_size_max> out;
  const std::size_t size = handler.handle(in, out, burst);
  check(stats.get(core::Outcome::rx_datagrams) == 1, "rx counted once");
  check(terminal_total(stats) == 1, "exactly one outcome counted");
  check(reasons_total(stats) == (request.error == proto::RequestError::ok ? 0U : 1U),
        "one reason counted per rejected datagram");
  if (request.error != proto::RequestError::ok) {
    check(stats.request_errors[static_cast<std::size_t>(request.error)].get() == 1,
          "the reason counted is decode_request's (or auth_unsupported)");
  }
  check_answer(in, std::span<const std::uint8_t>(out.data(), size), request, burst);

  // The same datagram answered in place, as the DPDK backend does.
  if (in.size() <= proto::datagram_size_max) {
    core::WorkerStats stats_in_place;
    core::Handler in_place(fuzz_config(), stats_in_place);
    in_place.start_above(t0 - 1);
    static std::array<std::uint8_t, proto::datagram_size_max> buffer;
    std::memcpy(buffer.data(), in.data(), in.size());
    const std::size_t size_in_place =
        in_place.handle(std::span<const std::uint8_t>(buffer.data(), in.size()), buffer, burst);
    check(size_in_place == size, "in-place answer has the same size");
    check(std::memcmp(buffer.data(), out.data(), size) == 0, "in-place answer has the same bytes");
  }
}

void fuzz_decoders(std::span<const std::uint8_t> in) {
  const proto::RequestView request = proto::decode_request(in);
  if (request.error == proto::RequestError::ok) {
    static std::array<std::uint8_t, proto::datagram_size_max> out;
    const bool is_signed = (request.request.flags & proto::flag_auth) != 0;
    const std::size_t body = in.size() - (is_signed ? proto::auth_trailer_size : 0);
    const std::size_t size = proto::encode_request(request.request, out, in.size());
    check(size == in.size(), "a valid request re-encodes to its size");
    check(std::memcmp(out.data(), in.data(), body) == 0, "a valid request re-encodes to its bytes");
    if (is_signed) {
      const std::uint8_t* trailer = in.data() + body;
      // PROTOCOL.md "Authentication": key id 4, server 4, timestamp 8, MAC 8.
      check(proto::load_be<std::uint32_t>(trailer) == request.trailer.key_id &&
                proto::load_be<std::uint32_t>(trailer + 4) == request.trailer.server &&
                proto::load_be<std::uint64_t>(trailer + 8) == request.trailer.timestamp_us &&
                proto::load_be<std::uint64_t>(trailer + 16) == request.trailer.mac,
            "the trailer fields are its bytes");
    }
  }
  const proto::ResponseView response = proto::decode_response(in);
  if (response.error == proto::ResponseError::ok) {
    static std::array<std::uint8_t, proto::datagram_size_max + 4096> out;
    if (in.size() > out.size()) return;
    std::size_t size = proto::encode_response_header(response.header, out);
    const bool is_info =
        response.header.opcode == proto::Opcode::info && response.header.status == proto::Status::ok;
    if (is_info) {
      check(response.body.size() == proto::info_body_size, "INFO body size");
      size = proto::encode_info(out, response.info());
    } else {
      check(response.body.size() == std::size_t{response.header.range_count} * proto::range_size,
            "range body size");
      for (std::size_t i = 0; i < response.header.range_count; ++i) {
        proto::encode_range(out, i, response.range(i));
      }
      size += response.body.size();
    }
    check(size == in.size(), "a valid response re-encodes to its size");
    check(std::memcmp(out.data(), in.data(), size) == 0, "a valid response re-encodes to its bytes");
  }
}

// --auth required with one key (id 7, GET_IDS only, batch 1000, 100 requests per second).
constexpr std::uint64_t now_ms = 1'735'689'600'000ULL;
constexpr proto::MacKey fuzz_secret = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

void fuzz_auth(std::span<const std::uint8_t> in, bool sign) {
  static core::ReplayFilter replay(1 << 12);
  core::Key key;
  key.id = 7;
  key.secret = fuzz_secret;
  key.opcodes = 1U << 1;
  key.batch_max = 1000;
  key.rate_per_s = 100;
  static const core::KeyTable keys({key});
  core::HandlerConfig config = fuzz_config();
  config.auth = core::AuthConfig{core::AuthMode::required, 5000, crypto_shorthash, &replay};
  static std::array<std::uint8_t, proto::datagram_size_max> datagram;
  std::size_t size = std::min(in.size(), datagram.size());
  std::memcpy(datagram.data(), in.data(), size);
  if (sign) {  // the input's header and padding, signed with the fuzz key at a nearby time
    if (size < proto::request_header_size || size + proto::auth_trailer_size > datagram.size()) return;
    datagram[proto::request_offset::flags + 1] |= static_cast<std::uint8_t>(proto::flag_auth);
    const std::uint64_t stamp_us = (now_ms + in.back() % 64 * 100) * 1000;  // up to 6.3 s off: some stale
    proto::store_be<std::uint32_t>(datagram.data() + size, 7);
    proto::store_be<std::uint64_t>(datagram.data() + size + 4, stamp_us);
    size += proto::auth_trailer_size;
    const std::uint64_t mac =
        proto::request_mac(std::span(datagram.data(), size), fuzz_secret, crypto_shorthash);
    proto::store_be<std::uint64_t>(datagram.data() + size - 8, mac);
  }
  const std::span<const std::uint8_t> request_bytes(datagram.data(), size);
  const proto::RequestView request = proto::decode_request(request_bytes);
  core::WorkerStats stats;
  core::Handler handler(config, stats);
  handler.start_above(t0 - 1);
  static std::array<std::uint8_t, proto::datagram_size_max> out;
  const std::size_t answer = handler.handle(request_bytes, out, core::Burst{t0, t0 + 3000, now_ms, &keys});
  check(stats.get(core::Outcome::rx_datagrams) == 1 && terminal_total(stats) == 1, "auth: counted once");
  check(answer <= proto::response_size_max(size), "auth: answer within the 3x allowance (the key has none)");
  const bool verified =
      request.error == proto::RequestError::ok && (request.request.flags & proto::flag_auth) != 0 &&
      request.trailer.key_id == 7 &&
      proto::request_mac(request_bytes, fuzz_secret, crypto_shorthash) == request.trailer.mac;
  if (!verified) check(stats.get(core::Outcome::ids_issued) == 0, "auth: no ID without a verified MAC");
  if (answer != 0 && proto::verify_answer(std::span(out.data(), answer), request.trailer.mac, fuzz_secret,
                                          crypto_shorthash)) {
    check(verified, "auth: only a verified request gets a signed answer");
    const auto body = std::span<const std::uint8_t>(out.data(), answer - proto::answer_mac_size);
    check(proto::decode_response(body).error == proto::ResponseError::ok, "auth: a signed answer decodes");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  fuzz_decoders(in);
  fuzz_handler(in, core::Burst{t0, t0 + 3000});  // normal
  fuzz_handler(in, core::Burst{t0, 0});          // nothing durable yet: RETRY
  fuzz_handler(in, core::Burst{t0, core::ceiling_fenced});
  fuzz_handler(in, core::Burst{t0, core::ceiling_draining});
  fuzz_handler(in, core::Burst{t0 + 5, t0 + 5});  // at the ceiling: at most one unit
  if (sodium_init() < 0) std::abort();
  fuzz_auth(in, false);
  fuzz_auth(in, true);
  return 0;
}
