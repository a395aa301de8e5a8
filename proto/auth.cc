// proto/auth.cc — see auth.h.
#include "proto/auth.h"

#include <algorithm>
#include <cstring>

namespace flurry::proto {
namespace {

std::uint64_t mac_of(const std::uint8_t* bytes, std::size_t size, const MacKey& key, MacFunction mac) {
  std::array<std::uint8_t, 8> out{};
  mac(out.data(), bytes, size, key.data());
  return load_be<std::uint64_t>(out.data());
}

}  // namespace

std::size_t encode_signed_request(const Request& request, std::span<std::uint8_t> out, std::size_t size,
                                  std::uint32_t key_id, std::uint32_t server, std::uint64_t timestamp_us,
                                  const MacKey& key, MacFunction mac) {
  // The body (GET_SEQ's name) must end before the trailer: grow to make room for both.
  size = std::max(size, request_header_size + request_body_size(request) + auth_trailer_size);
  if (size < signed_request_size_min || size > datagram_size_max || out.size() < size) return 0;
  Request signed_request = request;
  signed_request.flags = static_cast<std::uint16_t>(request.flags | flag_auth);
  if (encode_request(signed_request, out, size) != size) return 0;
  std::uint8_t* trailer = out.data() + size - auth_trailer_size;
  store_be<std::uint32_t>(trailer, key_id);
  store_be<std::uint32_t>(trailer + 4, server);
  store_be<std::uint64_t>(trailer + 8, timestamp_us);
  store_be<std::uint64_t>(trailer + 16, request_mac(out.first(size), key, mac));
  return size;
}

std::uint64_t request_mac(std::span<const std::uint8_t> datagram, const MacKey& key, MacFunction mac) {
  return mac_of(datagram.data(), datagram.size() - answer_mac_size, key, mac);
}

std::size_t sign_answer(std::span<std::uint8_t> out, std::size_t answer_size, std::uint64_t request_mac,
                        const MacKey& key, MacFunction mac) {
  // The request's MAC goes where the answer's will be, so the input is contiguous.
  store_be<std::uint64_t>(out.data() + answer_size, request_mac);
  const std::uint64_t answer_mac = mac_of(out.data(), answer_size + answer_mac_size, key, mac);
  store_be<std::uint64_t>(out.data() + answer_size, answer_mac);
  return answer_size + answer_mac_size;
}

bool verify_answer(std::span<const std::uint8_t> answer, std::uint64_t request_mac, const MacKey& key,
                   MacFunction mac) {
  if (answer.size() < response_header_size + answer_mac_size || answer.size() > datagram_size_max)
    return false;
  std::array<std::uint8_t, datagram_size_max> copy;
  std::memcpy(copy.data(), answer.data(), answer.size());
  const std::size_t body = answer.size() - answer_mac_size;
  store_be<std::uint64_t>(copy.data() + body, request_mac);
  const std::uint64_t expected = mac_of(copy.data(), answer.size(), key, mac);
  // One comparison of the whole word: no early exit on the first differing byte.
  return (expected ^ load_be<std::uint64_t>(answer.data() + body)) == 0;
}

}  // namespace flurry::proto
