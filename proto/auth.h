// proto/auth.h — signing and checking of authenticated requests and answers (PROTOCOL.md
// "Authentication"). A signed request ends with the 24-byte trailer: key id (u32), server (u32:
// the node id it is for, or any_server), timestamp (u64, microseconds since the Unix epoch, the
// client's clock), MAC (8 bytes) = SipHash-2-4 keyed with the key's 16-byte secret over every
// byte of the datagram before the MAC. A
// signed answer ends with 8 MAC bytes = SipHash-2-4 over (the answer's bytes before the MAC,
// then the request's 8 MAC bytes).
//
// proto/ links nothing but the standard library, so the MAC function is injected: every
// caller passes libsodium's crypto_shorthash (its signature is MacFunction's), never a
// home-made SipHash. No allocation, no exceptions; nothing reads outside its span.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "proto/wire.h"

namespace flurry::proto {

inline constexpr std::size_t mac_key_size = 16;
using MacKey = std::array<std::uint8_t, mac_key_size>;
// libsodium's crypto_shorthash (SipHash-2-4): out 8 bytes, key 16 bytes. Returns 0.
using MacFunction = int (*)(unsigned char* out, const unsigned char* in, unsigned long long in_size,
                            const unsigned char* key);

// The smallest signed request: header + trailer.
inline constexpr std::size_t signed_request_size_min = request_header_size + auth_trailer_size;
static_assert(signed_request_size_min == 44);

// Writes a signed request of `size` bytes (header, body, zero padding, trailer; flag_auth is
// set whatever request.flags says), grown where the body (GET_SEQ's name) and the trailer need
// more. `server` is the node id of the server it is for (any_server: PING and INFO only).
// Returns the size written, or 0 if it is below 44 or above datagram_size_max, or `out` is too
// small.
std::size_t encode_signed_request(const Request& request, std::span<std::uint8_t> out, std::size_t size,
                                  std::uint32_t key_id, std::uint32_t server, std::uint64_t timestamp_us,
                                  const MacKey& key, MacFunction mac);

// The MAC of a signed request's bytes before its MAC (the datagram must be at least 44 bytes).
std::uint64_t request_mac(std::span<const std::uint8_t> datagram, const MacKey& key, MacFunction mac);

// Appends the answer MAC to the `answer_size` bytes of `out` (which must hold 8 more).
// Returns answer_size + answer_mac_size.
std::size_t sign_answer(std::span<std::uint8_t> out, std::size_t answer_size, std::uint64_t request_mac,
                        const MacKey& key, MacFunction mac);

// True when `answer` ends with the right MAC for the request whose MAC was `request_mac`.
// A client then decodes answer.first(answer.size() - answer_mac_size).
bool verify_answer(std::span<const std::uint8_t> answer, std::uint64_t request_mac, const MacKey& key,
                   MacFunction mac);

}  // namespace flurry::proto
