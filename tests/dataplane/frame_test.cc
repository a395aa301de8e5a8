// tests/dataplane/frame_test.cc — dataplane/frame on plain byte buffers (no EAL).
//
// Frames are built here by hand and answers are checked against a checksum written here
// independently of frame.cc (RFC 1071, word by word, and a published IPv4 header vector).
// Every malformed input must be dropped with its own reason; every truncation of a valid
// frame and random garbage must be dropped without reading or writing out of bounds.
#include "dataplane/frame.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "core/handler.h"
#include "proto/layout.h"
#include "proto/wire.h"

// Every heap allocation of this test binary is counted, to prove process() makes none.
namespace {
std::size_t allocations = 0;
void* volatile allocation_sink = nullptr;  // keeps the probe allocation from being elided
// Out of line so that g++ does not pair an inlined free() with a new-expression and warn.
[[gnu::noinline]] void counted_free(void* p) noexcept { std::free(p); }
}  // namespace
void* operator new(std::size_t size) {
  ++allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  ++allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }

namespace flurry::dataplane::frame {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr MacAddress our_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
constexpr MacAddress peer_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
constexpr std::uint32_t our_ip = 0x0a4d0001;   // 10.77.0.1
constexpr std::uint32_t peer_ip = 0x0a4d0002;  // 10.77.0.2
constexpr std::uint16_t our_port = 7420;
constexpr std::uint16_t peer_port = 40000;

// ---- an independent checksum (RFC 1071), not sharing code with frame.cc ----
std::uint16_t reference_checksum(const std::uint8_t* data, std::size_t size, std::uint32_t initial = 0) {
  std::uint32_t sum = initial;
  for (std::size_t i = 0; i < size; i += 2) {
    const std::uint32_t high = data[i];
    const std::uint32_t low = i + 1 < size ? data[i + 1] : 0;
    sum += (high << 8) | low;
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return static_cast<std::uint16_t>(~sum & 0xffff);
}
std::uint32_t reference_pseudo(std::uint32_t source, std::uint32_t destination, std::uint16_t length) {
  std::uint32_t sum =
      (source >> 16) + (source & 0xffff) + (destination >> 16) + (destination & 0xffff) + 17 + length;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum;
}

void put16(Bytes& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::uint8_t>(v >> 8);
  b[at + 1] = static_cast<std::uint8_t>(v);
}
void put32(Bytes& b, std::size_t at, std::uint32_t v) {
  put16(b, at, static_cast<std::uint16_t>(v >> 16));
  put16(b, at + 2, static_cast<std::uint16_t>(v));
}
std::uint16_t get16(const Bytes& b, std::size_t at) {
  return static_cast<std::uint16_t>((b[at] << 8) | b[at + 1]);
}
std::uint32_t get32(const Bytes& b, std::size_t at) {
  return (std::uint32_t{get16(b, at)} << 16) | get16(b, at + 2);
}

void put_ethernet(Bytes& b, const MacAddress& destination, const MacAddress& source, std::uint16_t type) {
  std::copy(destination.begin(), destination.end(), b.begin());
  std::copy(source.begin(), source.end(), b.begin() + 6);
  put16(b, 12, type);
}

// IPv4 header at 14 with a correct checksum.
void put_ipv4(Bytes& b, std::uint8_t protocol, std::uint16_t total_length, std::uint32_t source,
              std::uint32_t destination, std::uint16_t fragment = 0) {
  b[14] = 0x45;
  b[15] = 0;
  put16(b, 16, total_length);
  put16(b, 18, 0x1234);
  put16(b, 20, fragment);
  b[22] = 61;
  b[23] = protocol;
  put16(b, 24, 0);
  put32(b, 26, source);
  put32(b, 30, destination);
  put16(b, 24, reference_checksum(b.data() + 14, 20));
}

Bytes arp_request(std::uint32_t target_ip = our_ip, std::uint16_t operation = 1) {
  Bytes b(42);
  put_ethernet(b, MacAddress{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, peer_mac, 0x0806);
  put16(b, 14, 1);
  put16(b, 16, 0x0800);
  b[18] = 6;
  b[19] = 4;
  put16(b, 20, operation);
  std::copy(peer_mac.begin(), peer_mac.end(), b.begin() + 22);
  put32(b, 28, peer_ip);
  put32(b, 38, target_ip);
  return b;
}

Bytes icmp_echo(std::size_t data_size = 56) {
  const auto total = static_cast<std::uint16_t>(20 + 8 + data_size);
  Bytes b(14 + total);
  put_ethernet(b, our_mac, peer_mac, 0x0800);
  put_ipv4(b, 1, total, peer_ip, our_ip);
  b[34] = 8;
  b[35] = 0;
  put16(b, 38, 0x4242);  // identifier
  put16(b, 40, 7);       // sequence
  for (std::size_t i = 0; i < data_size; ++i) b[42 + i] = static_cast<std::uint8_t>(i * 7);
  put16(b, 36, reference_checksum(b.data() + 34, 8 + data_size));
  return b;
}

Bytes udp_datagram(const Bytes& payload, std::uint16_t destination_port = our_port, bool checksum = true) {
  const auto udp_length = static_cast<std::uint16_t>(8 + payload.size());
  const auto total = static_cast<std::uint16_t>(20 + udp_length);
  Bytes b(14 + total);
  put_ethernet(b, our_mac, peer_mac, 0x0800);
  put_ipv4(b, 17, total, peer_ip, our_ip);
  put16(b, 34, peer_port);
  put16(b, 36, destination_port);
  put16(b, 38, udp_length);
  put16(b, 40, 0);
  std::copy(payload.begin(), payload.end(), b.begin() + 42);
  if (checksum) {
    std::uint16_t sum =
        reference_checksum(b.data() + 34, udp_length, reference_pseudo(peer_ip, our_ip, udp_length));
    put16(b, 40, sum == 0 ? 0xffff : sum);
  }
  return b;
}

Bytes get_ids_request(std::uint32_t count, std::uint64_t request_id = 77) {
  Bytes payload(proto::request_header_size);
  proto::Request request;
  request.opcode = proto::Opcode::get_ids;
  request.count = count;
  request.request_id = request_id;
  EXPECT_EQ(proto::encode_request(request, payload), proto::request_header_size);
  return payload;
}

class FrameTest : public ::testing::Test {
 protected:
  FrameTest() : handler_(make_config(), stats_) { handler_.start_above(999); }

  static core::HandlerConfig make_config() {
    core::HandlerConfig config;
    config.layout = *proto::layout_preset("snowflake");
    config.node_id = 5;
    return config;
  }

  // Runs process() on a copy of `frame` inside a buffer of `capacity` bytes.
  Result run(Bytes& frame, const RxMeta& rx = {}, const TxOffload& tx = {},
             std::size_t capacity = buffer_size_min) {
    const std::size_t length = frame.size();
    if (frame.size() < capacity) frame.resize(capacity, 0xee);
    Result result =
        process(std::span<std::uint8_t>(frame.data(), capacity), length, rx, identity_, tx, handler_, burst_);
    if (result.action != Action::drop) {
      EXPECT_LE(result.length, capacity);
      frame.resize(result.length);
    }
    return result;
  }

  Drop drop_of(Bytes frame, const RxMeta& rx = {}) {
    const Result result = run(frame, rx);
    EXPECT_EQ(result.action, Action::drop);
    return result.drop;
  }

  // Checks IPv4 and UDP of an answer to peer; returns the UDP payload.
  Bytes check_udp_answer(const Bytes& b) {
    EXPECT_TRUE(std::equal(peer_mac.begin(), peer_mac.end(), b.begin()));
    EXPECT_TRUE(std::equal(our_mac.begin(), our_mac.end(), b.begin() + 6));
    EXPECT_EQ(get16(b, 12), 0x0800);
    EXPECT_EQ(b[14], 0x45);
    EXPECT_EQ(get16(b, 16), b.size() - 14);
    EXPECT_EQ(get16(b, 20) & 0x3fff, 0);  // not a fragment
    EXPECT_EQ(b[23], 17);
    EXPECT_EQ(get32(b, 26), our_ip);
    EXPECT_EQ(get32(b, 30), peer_ip);
    EXPECT_EQ(reference_checksum(b.data() + 14, 20), 0) << "IPv4 header checksum";
    EXPECT_EQ(get16(b, 34), our_port);
    EXPECT_EQ(get16(b, 36), peer_port);
    const std::uint16_t udp_length = get16(b, 38);
    EXPECT_EQ(udp_length, b.size() - 34);
    EXPECT_NE(get16(b, 40), 0);
    EXPECT_EQ(reference_checksum(b.data() + 34, udp_length, reference_pseudo(our_ip, peer_ip, udp_length)), 0)
        << "UDP checksum";
    return Bytes(b.begin() + 42, b.end());
  }

  core::WorkerStats stats_;
  core::Handler handler_;
  core::Burst burst_{1000, 2000};
  Identity identity_{our_mac, our_ip, our_port};
};

TEST(Checksum, MatchesPublishedIpv4Vector) {
  // The IPv4 header example of RFC 1071 practice (Wikipedia "IPv4 header checksum").
  const std::array<std::uint8_t, 20> header = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                                               0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(checksum_finish(checksum_add(0, header)), 0xb861);
  EXPECT_EQ(reference_checksum(header.data(), header.size()), 0xb861);
}

TEST(Checksum, AgreesWithReferenceOnRandomData) {
  std::mt19937 random(12345);
  for (int round = 0; round < 2000; ++round) {
    Bytes data(random() % 1600);
    for (auto& byte : data) byte = static_cast<std::uint8_t>(random());
    ASSERT_EQ(checksum_finish(checksum_add(0, data)), reference_checksum(data.data(), data.size()))
        << "size " << data.size();
  }
}

TEST(Checksum, ChainsAndAnyAlignmentAgreeWithReference) {
  // The fast sum loads 8 bytes at a time from any address: every start offset, every length
  // around the word sizes, and a sum chained over two even-length parts equals the reference.
  std::mt19937 random(4242);
  Bytes storage(2100);
  for (auto& byte : storage) byte = static_cast<std::uint8_t>(random());
  for (std::size_t offset = 0; offset < 9; ++offset) {
    for (std::size_t size = 0; size < 40; ++size) {
      ASSERT_EQ(
          checksum_finish(checksum_add(0, std::span<const std::uint8_t>(storage.data() + offset, size))),
          reference_checksum(storage.data() + offset, size))
          << "offset " << offset << " size " << size;
    }
  }
  for (int round = 0; round < 500; ++round) {
    const std::size_t offset = random() % 16, first = 2 * (random() % 400), second = random() % 1200;
    const std::uint8_t* data = storage.data() + offset;
    const std::uint32_t chained =
        checksum_add(checksum_add(0xfffe, std::span<const std::uint8_t>(data, first)),
                     std::span<const std::uint8_t>(data + first, second));
    ASSERT_EQ(checksum_finish(chained), reference_checksum(data, first + second, 0xfffe))
        << "round " << round;
  }
}

TEST(Checksum, EveryLengthAndStartAddressAgreesWithReference) {
  // checksum_add sums 64-bit words with the carry wrapped, 32 bytes a round, then 16, 8, 4, 2
  // and 1: every length up to a full frame, from every start address modulo 16 (odd ones
  // included), on random bytes, and on all-0xff bytes, which carry out of every word.
  std::mt19937 random(20261125);
  Bytes storage(1514 + 16);
  Bytes ones(storage.size(), 0xff);
  for (auto& byte : storage) byte = static_cast<std::uint8_t>(random());
  for (std::size_t offset = 0; offset < 16; ++offset) {
    for (std::size_t size = 0; offset + size <= storage.size() && size <= 1514; ++size) {
      for (const Bytes* bytes : {&storage, &ones}) {
        const std::uint8_t* data = bytes->data() + offset;
        const auto initial = static_cast<std::uint32_t>(random() % 0x10000);
        ASSERT_EQ(checksum_finish(checksum_add(initial, std::span<const std::uint8_t>(data, size))),
                  reference_checksum(data, size, initial))
            << "offset " << offset << " size " << size << (bytes == &ones ? " (all 0xff)" : "");
      }
    }
  }
}

TEST(Checksum, LargeRunningSumsFoldLikeTheReference) {
  // A sum carried in from earlier parts may use all 32 bits.
  std::mt19937 random(7);
  Bytes data(64);
  for (auto& byte : data) byte = static_cast<std::uint8_t>(random());
  for (const std::uint32_t initial : {0xffffU, 0x10000U, 0xfffeffffU, 0xffff0000U, 0x7fffffffU}) {
    for (std::size_t size = 0; size <= data.size(); ++size) {
      std::uint32_t folded = initial;
      while (folded >> 16) folded = (folded & 0xffff) + (folded >> 16);
      ASSERT_EQ(checksum_finish(checksum_add(initial, std::span<const std::uint8_t>(data.data(), size))),
                reference_checksum(data.data(), size, folded))
          << "initial " << initial << " size " << size;
    }
  }
}

TEST_F(FrameTest, ArpRequestForUsIsAnswered) {
  Bytes b = arp_request();
  const Result result = run(b);
  ASSERT_EQ(result.action, Action::arp_reply);
  ASSERT_EQ(b.size(), 42u);
  EXPECT_TRUE(std::equal(peer_mac.begin(), peer_mac.end(), b.begin()));       // to the asker
  EXPECT_TRUE(std::equal(our_mac.begin(), our_mac.end(), b.begin() + 6));     // from us
  EXPECT_EQ(get16(b, 20), 2);                                                 // reply
  EXPECT_TRUE(std::equal(our_mac.begin(), our_mac.end(), b.begin() + 22));    // sender MAC
  EXPECT_EQ(get32(b, 28), our_ip);                                            // sender IP
  EXPECT_TRUE(std::equal(peer_mac.begin(), peer_mac.end(), b.begin() + 32));  // target MAC
  EXPECT_EQ(get32(b, 38), peer_ip);                                           // target IP
}

TEST_F(FrameTest, ArpWithEthernetPaddingIsAnswered) {
  Bytes b = arp_request();
  b.resize(60, 0);
  EXPECT_EQ(run(b).action, Action::arp_reply);
  EXPECT_EQ(b.size(), 42u);
}

TEST_F(FrameTest, ArpDrops) {
  EXPECT_EQ(drop_of(arp_request(0x0a4d0009)), Drop::arp_not_for_us);
  EXPECT_EQ(drop_of(arp_request(our_ip, 2)), Drop::arp_not_request);
  Bytes other_mac = arp_request();
  other_mac[0] = 0x02;  // unicast, not ours
  EXPECT_EQ(drop_of(other_mac), Drop::l2_not_for_us);
  Bytes bad_hardware = arp_request();
  bad_hardware[18] = 8;
  EXPECT_EQ(drop_of(bad_hardware), Drop::arp_malformed);
}

TEST_F(FrameTest, IcmpEchoIsAnswered) {
  const Bytes request = icmp_echo(56);
  Bytes b = request;
  const Result result = run(b);
  ASSERT_EQ(result.action, Action::icmp_echo_reply);
  ASSERT_EQ(b.size(), request.size());
  EXPECT_TRUE(std::equal(peer_mac.begin(), peer_mac.end(), b.begin()));
  EXPECT_TRUE(std::equal(our_mac.begin(), our_mac.end(), b.begin() + 6));
  EXPECT_EQ(reference_checksum(b.data() + 14, 20), 0);
  EXPECT_EQ(get32(b, 26), our_ip);
  EXPECT_EQ(get32(b, 30), peer_ip);
  EXPECT_EQ(b[34], 0);  // echo reply
  EXPECT_EQ(reference_checksum(b.data() + 34, b.size() - 34), 0);
  EXPECT_TRUE(std::equal(request.begin() + 38, request.end(), b.begin() + 38));  // id, seq, data
}

TEST_F(FrameTest, IcmpOddLengthIsAnswered) {
  Bytes b = icmp_echo(33);
  ASSERT_EQ(run(b).action, Action::icmp_echo_reply);
  EXPECT_EQ(reference_checksum(b.data() + 34, b.size() - 34), 0);
}

TEST_F(FrameTest, IcmpDrops) {
  Bytes bad = icmp_echo();
  bad[50] ^= 0x01;
  EXPECT_EQ(drop_of(bad), Drop::icmp_bad_checksum);
  Bytes reply = icmp_echo();
  reply[34] = 0;
  EXPECT_EQ(drop_of(reply), Drop::icmp_not_echo);
}

TEST_F(FrameTest, UdpGetIdsIsAnsweredInPlace) {
  Bytes b = udp_datagram(get_ids_request(10, 4242));
  const Result result = run(b);
  ASSERT_EQ(result.action, Action::udp_answer);
  EXPECT_FALSE(result.offload_ipv4_checksum);
  EXPECT_FALSE(result.offload_udp_checksum);
  const Bytes payload = check_udp_answer(b);
  const proto::ResponseView view = proto::decode_response(payload);
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  EXPECT_EQ(view.header.status, proto::Status::ok);
  EXPECT_EQ(view.header.request_id, 4242u);
  EXPECT_EQ(view.header.node, 5);
  ASSERT_EQ(view.header.range_count, 1);
  EXPECT_EQ(view.range(0).count, 10u);
  EXPECT_LE(payload.size(), proto::response_size_max(proto::request_header_size));
}

TEST_F(FrameTest, UdpOfEveryPaddedSizeIsVerifiedAndAnswered) {
  // The request's UDP checksum is verified over every length a client may pad to (odd ones
  // included) and the answer's IPv4 and UDP checksums, built from the values written, check
  // against the reference; one flipped bit anywhere in the payload is a bad checksum.
  for (std::size_t size = proto::request_header_size; size <= 400; ++size) {
    Bytes payload(size, 0);
    proto::Request request;
    request.opcode = proto::Opcode::get_ids;
    request.count = 1 + static_cast<std::uint32_t>(size % 7);
    request.request_id = size;
    ASSERT_EQ(proto::encode_request(request, payload, size), size);
    Bytes b = udp_datagram(payload);
    Bytes corrupt = b;
    corrupt[42 + (size * 13) % size] ^= static_cast<std::uint8_t>(1U << (size % 8));  // in the payload
    ASSERT_EQ(run(b).action, Action::udp_answer) << "size " << size;
    check_udp_answer(b);
    EXPECT_EQ(drop_of(corrupt), Drop::udp_bad_checksum) << "size " << size;
  }
}

TEST_F(FrameTest, UdpWithoutChecksumIsAccepted) {
  Bytes b = udp_datagram(get_ids_request(1), our_port, false);
  ASSERT_EQ(run(b).action, Action::udp_answer);
  check_udp_answer(b);
}

TEST_F(FrameTest, UdpChecksumOffloadLeavesPseudoHeaderSum) {
  Bytes b = udp_datagram(get_ids_request(3));
  const Result result = run(b, {}, TxOffload{true, true});
  ASSERT_EQ(result.action, Action::udp_answer);
  EXPECT_TRUE(result.offload_ipv4_checksum);
  EXPECT_TRUE(result.offload_udp_checksum);
  EXPECT_EQ(get16(b, 24), 0) << "IPv4 checksum left to the port";
  const std::uint16_t udp_length = get16(b, 38);
  EXPECT_EQ(get16(b, 40), reference_pseudo(our_ip, peer_ip, udp_length)) << "pseudo-header sum, not inverted";
  // What the port does: checksum over the UDP bytes, seeded by the field, stored inverted.
  Bytes finished = b;
  put16(finished, 40, reference_checksum(b.data() + 34, udp_length));
  put16(finished, 24, reference_checksum(b.data() + 14, 20));
  check_udp_answer(finished);
}

TEST_F(FrameTest, HardwareVerifiedChecksumsAreTrusted) {
  Bytes b = udp_datagram(get_ids_request(1));
  put16(b, 40, 0x1111);  // wrong, but the port said good
  EXPECT_EQ(run(b, RxMeta{Checksum::good, Checksum::good}).action, Action::udp_answer);
  EXPECT_EQ(drop_of(udp_datagram(get_ids_request(1)), RxMeta{Checksum::bad, Checksum::unknown}),
            Drop::ip_bad_checksum);
  EXPECT_EQ(drop_of(udp_datagram(get_ids_request(1)), RxMeta{Checksum::good, Checksum::bad}),
            Drop::udp_bad_checksum);
}

TEST_F(FrameTest, BadRequestIsAnsweredGarbageIsDropped) {
  Bytes bad_version = get_ids_request(1);
  bad_version[proto::request_offset::version] = 9;
  Bytes b = udp_datagram(bad_version);
  ASSERT_EQ(run(b).action, Action::udp_answer);
  EXPECT_EQ(proto::decode_response(check_udp_answer(b)).header.status, proto::Status::bad_request);

  // Dropped by the handler (counted there by reason), not a frame-level drop.
  for (const Bytes& payload : {Bytes(40, 0xab) /* bad magic */, Bytes(3, 0x46) /* too short */, Bytes{}}) {
    Bytes frame = udp_datagram(payload);
    EXPECT_EQ(run(frame).action, Action::payload_dropped) << payload.size() << " bytes";
  }
}

TEST_F(FrameTest, EveryMalformationHasItsReason) {
  const Bytes good = udp_datagram(get_ids_request(1));
  auto with = [&](auto change) {
    Bytes b = good;
    change(b);
    return b;
  };
  auto reseal_ip = [](Bytes& b) {
    put16(b, 24, 0);
    put16(b, 24, reference_checksum(b.data() + 14, 20));
  };
  EXPECT_EQ(drop_of(with([](Bytes& b) { b[6] = 0x01; })), Drop::l2_bad_source);
  EXPECT_EQ(drop_of(with([](Bytes& b) { b[0] = 0xff; })), Drop::l2_not_for_us);
  EXPECT_EQ(drop_of(with([](Bytes& b) { put16(b, 12, 0x86dd); })), Drop::ether_type_other);
  EXPECT_EQ(drop_of(with([](Bytes& b) { put16(b, 12, 0x8100); })), Drop::ether_type_other);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              b[14] = 0x65;
              reseal_ip(b);
            })),
            Drop::ip_bad_header);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              b[14] = 0x44;
              reseal_ip(b);
            })),
            Drop::ip_bad_header);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              b[14] = 0x46;
              reseal_ip(b);
            })),
            Drop::ip_options);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              put16(b, 16, 1400);
              reseal_ip(b);
            })),
            Drop::ip_bad_length);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              put16(b, 16, 19);
              reseal_ip(b);
            })),
            Drop::ip_bad_length);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              put16(b, 20, 0x2000);
              reseal_ip(b);
            })),
            Drop::ip_fragment);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              put16(b, 20, 0x0010);
              reseal_ip(b);
            })),
            Drop::ip_fragment);
  EXPECT_EQ(drop_of(with([](Bytes& b) { b[25] ^= 0x40; })), Drop::ip_bad_checksum);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              put32(b, 30, 0x0a4d0003);
              reseal_ip(b);
            })),
            Drop::ip_not_for_us);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              put32(b, 26, 0);
              reseal_ip(b);
            })),
            Drop::ip_bad_source);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              put32(b, 26, 0xffffffff);
              reseal_ip(b);
            })),
            Drop::ip_bad_source);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              put32(b, 26, 0xe0000001);
              reseal_ip(b);
            })),
            Drop::ip_bad_source);
  EXPECT_EQ(drop_of(with([&](Bytes& b) {
              b[23] = 6;
              reseal_ip(b);
            })),
            Drop::ip_proto_other);
  EXPECT_EQ(drop_of(with([](Bytes& b) { put16(b, 38, 7); })), Drop::udp_bad_length);
  EXPECT_EQ(drop_of(with([](Bytes& b) { put16(b, 38, 200); })), Drop::udp_bad_length);
  EXPECT_EQ(drop_of(udp_datagram(get_ids_request(1), 7421)), Drop::udp_wrong_port);
  EXPECT_EQ(drop_of(with([](Bytes& b) { put16(b, 34, 0); })), Drop::udp_bad_source_port);
  EXPECT_EQ(drop_of(with([](Bytes& b) { b[50] ^= 0x10; })), Drop::udp_bad_checksum);
  Bytes small = good;
  const Result no_room = run(small, {}, {}, buffer_size_min - 1);
  EXPECT_EQ(no_room.action, Action::drop);
  EXPECT_EQ(no_room.drop, Drop::no_room);
}

TEST_F(FrameTest, EveryTruncationIsDropped) {
  for (const Bytes& whole : {arp_request(), icmp_echo(), udp_datagram(get_ids_request(2))}) {
    for (std::size_t length = 0; length < whole.size(); ++length) {
      Bytes b(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(length));
      const Result result = run(b);
      EXPECT_EQ(result.action, Action::drop) << "length " << length;
    }
  }
}

TEST_F(FrameTest, RandomGarbageNeverEscapes) {
  std::mt19937 random(2024);
  const Bytes templates[] = {arp_request(), icmp_echo(), udp_datagram(get_ids_request(2))};
  for (int round = 0; round < 20000; ++round) {
    Bytes b = templates[round % 3];
    const int flips = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < flips; ++i) b[random() % b.size()] = static_cast<std::uint8_t>(random());
    if (random() % 4 == 0) b.resize(random() % (b.size() + 1));
    const std::size_t length = b.size();
    b.resize(buffer_size_min, 0);
    const Result result =
        process(std::span<std::uint8_t>(b.data(), b.size()), length, {}, identity_, {}, handler_, burst_);
    if (result.action == Action::drop) {
      ASSERT_LT(static_cast<std::size_t>(result.drop), drop_count);
      ASSERT_NE(to_string(result.drop), "unknown");
    } else {
      ASSERT_LE(result.length, buffer_size_min);
      ASSERT_GE(result.length, ether_header_size);
    }
  }
}

TEST_F(FrameTest, ProcessNeverAllocates) {
  std::vector<Bytes> frames = {arp_request(), icmp_echo(), udp_datagram(get_ids_request(100)),
                               udp_datagram(Bytes(40, 0xab)), udp_datagram(get_ids_request(1), 9)};
  for (auto& frame : frames) frame.resize(buffer_size_min, 0);
  const std::size_t probe = allocations;
  allocation_sink = new int(1);  // the counter works
  delete static_cast<int*>(allocation_sink);
  ASSERT_EQ(allocations, probe + 1);
  const std::size_t before = allocations;
  for (int round = 0; round < 100; ++round) {
    for (auto& frame : frames) {
      Bytes& b = frame;
      process(std::span<std::uint8_t>(b.data(), b.size()), 100, {}, identity_, {}, handler_, burst_);
    }
  }
  EXPECT_EQ(allocations, before);
}

TEST(DropNames, AreDistinct) {
  for (std::size_t i = 0; i < drop_count; ++i) {
    for (std::size_t j = i + 1; j < drop_count; ++j) {
      EXPECT_NE(to_string(static_cast<Drop>(i)), to_string(static_cast<Drop>(j)));
    }
    EXPECT_NE(to_string(static_cast<Drop>(i)), "unknown");
  }
}

}  // namespace
}  // namespace flurry::dataplane::frame
