// tests/proto/wire_test.cc — checks proto/wire.{h,cc}, proto/layout.h and core::Handler
// against the test vectors of proto/PROTOCOL.md, read at test time.
//
// The vectors were computed from the document (tests/proto/make_vectors.py), not by the C++
// encoder, so every check here compares the code with the document, both ways: decode of the
// bytes gives the fields, and encode of the fields gives the bytes. The path of PROTOCOL.md
// comes from the environment (FLURRY_PROTOCOL_MD, set by meson) or the build-time default.
// The parser refuses to pass vacuously: it requires a minimum number of vectors, every named
// vector below, and every RequestError / Status / ResponseError of v1 to appear.
#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sodium.h>

#include "core/ceiling.h"
#include "core/handler.h"
#include "core/keys.h"
#include "proto/auth.h"
#include "proto/layout.h"
#include "proto/wire.h"

#ifndef FLURRY_PROTOCOL_MD
#define FLURRY_PROTOCOL_MD "proto/PROTOCOL.md"
#endif

namespace flurry {
namespace {

struct Vector {
  std::string name;
  std::map<std::string, std::vector<std::string>> values;  // key -> every line's value

  bool has(const std::string& key) const { return values.count(key) != 0; }
  const std::string& one(const std::string& key) const {
    static const std::string empty;
    auto it = values.find(key);
    if (it == values.end() || it->second.empty()) return empty;
    return it->second.front();
  }
};

std::string protocol_path() {
  if (const char* env = std::getenv("FLURRY_PROTOCOL_MD"); env != nullptr && *env != '\0') {
    return env;
  }
  return FLURRY_PROTOCOL_MD;
}

std::string trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return {};
  const auto end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

// Every fenced block whose first line is "vector: <name>".
std::vector<Vector> parse_vectors(std::istream& in) {
  std::vector<Vector> vectors;
  std::string line;
  bool in_block = false;
  std::vector<std::string> block;
  while (std::getline(in, line)) {
    if (trim(line).rfind("```", 0) == 0) {
      if (in_block && !block.empty() && block.front().rfind("vector:", 0) == 0) {
        Vector vector;
        for (const std::string& entry : block) {
          const auto colon = entry.find(':');
          if (colon == std::string::npos) {
            ADD_FAILURE() << "line without a key in a vector block: '" << entry << "'";
            continue;
          }
          vector.values[trim(entry.substr(0, colon))].push_back(trim(entry.substr(colon + 1)));
        }
        vector.name = vector.one("vector");
        vectors.push_back(std::move(vector));
      }
      in_block = !in_block;
      block.clear();
      continue;
    }
    if (in_block && !trim(line).empty()) block.push_back(trim(line));
  }
  EXPECT_FALSE(in_block) << "PROTOCOL.md ends inside a fenced block";
  return vectors;
}

std::optional<std::uint64_t> parse_number(const std::string& text) {
  std::uint64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    begin += 2;
    base = 16;
  }
  auto [ptr, ec] = std::from_chars(begin, end, value, base);
  if (ec != std::errc{} || ptr != end || begin == end) return std::nullopt;
  return value;
}

// "a=1 b=0x10" -> {a: "1", b: "0x10"}.
std::map<std::string, std::string> parse_fields(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      ADD_FAILURE() << "bad field '" << word << "' in '" << text << "'";
      continue;
    }
    fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return fields;
}

// Numeric field, failing the test (and returning 0) when absent or malformed.
std::uint64_t number(const std::map<std::string, std::string>& fields, const std::string& key,
                     const std::string& where) {
  auto it = fields.find(key);
  if (it == fields.end()) {
    ADD_FAILURE() << where << ": field '" << key << "' missing";
    return 0;
  }
  auto value = parse_number(it->second);
  if (!value) {
    ADD_FAILURE() << where << ": field '" << key << "' is not a number: " << it->second;
    return 0;
  }
  return *value;
}

std::vector<std::uint8_t> vector_bytes(const Vector& vector) {
  std::string digits;
  auto it = vector.values.find("hex");
  if (it != vector.values.end()) {
    for (const std::string& line : it->second) {
      for (char c : line) {
        if (c != ' ') digits.push_back(c);
      }
    }
  }
  std::vector<std::uint8_t> bytes;
  if (digits.size() % 2 != 0) {
    ADD_FAILURE() << vector.name << ": odd number of hex digits";
    return bytes;
  }
  for (std::size_t i = 0; i < digits.size(); i += 2) {
    std::uint8_t byte = 0;
    auto [ptr, ec] = std::from_chars(digits.data() + i, digits.data() + i + 2, byte, 16);
    if (ec != std::errc{} || ptr != digits.data() + i + 2) {
      ADD_FAILURE() << vector.name << ": bad hex '" << digits.substr(i, 2) << "'";
      return {};
    }
    bytes.push_back(byte);
  }
  if (auto size = parse_number(vector.one("size")); !size || *size != bytes.size()) {
    ADD_FAILURE() << vector.name << ": size line '" << vector.one("size") << "' but " << bytes.size()
                  << " bytes of hex";
  }
  return bytes;
}

std::string hex(std::span<const std::uint8_t> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string text;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i != 0 && i % 2 == 0) text.push_back(' ');
    text.push_back(digits[bytes[i] >> 4]);
    text.push_back(digits[bytes[i] & 0xf]);
  }
  return text;
}

// The smallest vector set this test accepts; a parser that finds fewer is broken.
constexpr std::size_t vectors_min = 97;
const std::vector<std::string> required_names = {
    "reference_server",
    "reference_server_core_from_node",
    "signed_get_ids",
    "signed_get_ids_answer",
    "signed_ping_padded",
    "signed_ping_padded_answer",
    "get_ids_basic",
    "get_ids_basic_answer",
    "get_ids_three_ranges",
    "get_ids_three_ranges_answer",
    "get_ids_partial",
    "get_ids_padded",
    "get_ids_padded_answer",
    "get_ids_count_max",
    "ping",
    "ping_answer",
    "info",
    "info_answer",
    "get_ids_retry",
    "get_ids_retry_answer",
    "get_ids_fenced",
    "get_ids_fenced_answer",
    "get_ids_draining",
    "get_ids_draining_answer",
    "get_ids_exhausted",
    "get_ids_exhausted_answer",
    "get_ids_core_from_node",
    "get_ids_core_from_node_answer",
    "info_core_from_node",
    "info_core_from_node_answer",
    "drop_too_short",
    "drop_bad_magic",
    "drop_is_response",
    "err_bad_version",
    "err_bad_opcode",
    "err_bad_flags",
    "err_reserved_nonzero",
    "err_count_zero",
    "err_count_too_large",
    "err_trailing_bytes",
    "err_count_unexpected",
    "err_auth",
    "err_auth_answer",
    "resp_too_short",
    "resp_bad_magic",
    "resp_bad_version",
    "resp_not_response",
    "resp_bad_status",
    "resp_bad_opcode",
    "resp_status_unexpected",
    "resp_status_unexpected_exhausted",
    "resp_ranges_unexpected_retry",
    "resp_ranges_unexpected_info",
    "resp_ranges_missing",
    "resp_bad_length",
    "resp_bad_range_empty",
    "resp_bad_range_overlap",
    "resp_bad_range_order",
    "resp_bad_range_sign",
    "id_snowflake_first",
    "id_snowflake",
    "id_snowflake_core2",
    "id_core_from_node",
    "id_js_safe",
    "id_js_safe_max",
    "get_seq_unknown",
    "get_seq_unknown_answer",
    "err_name_missing",
    "err_name_too_long",
    "err_name_truncated",
    "err_name_bad",
    "err_seq_trailing_bytes",
    "resp_status_unexpected_seq",
    "get_seq_segment",
    "get_seq_segment_answer",
    "get_seq_monotonic_answer",
    "get_seq_not_owner_answer",
};

// The header fields of a request or response, read straight from the first 20 bytes with
// nothing checked: what every `fields:` line must say (PROTOCOL.md, "Test vectors").
std::map<std::string, std::uint64_t> raw_fields(const std::string& kind,
                                                const std::vector<std::uint8_t>& bytes) {
  const std::uint8_t* p = bytes.data();
  if (kind == "request") {
    return {{"opcode", p[proto::request_offset::opcode]},
            {"flags", proto::load_be<std::uint16_t>(p + proto::request_offset::flags)},
            {"count", proto::load_be<std::uint32_t>(p + proto::request_offset::count)},
            {"request_id", proto::load_be<std::uint64_t>(p + proto::request_offset::request_id)}};
  }
  return {{"opcode", p[proto::response_offset::opcode] & ~proto::opcode_response_bit},
          {"status", p[proto::response_offset::status]},
          {"range_count", p[proto::response_offset::range_count]},
          {"node", proto::load_be<std::uint16_t>(p + proto::response_offset::node)},
          {"request_id", proto::load_be<std::uint64_t>(p + proto::response_offset::request_id)},
          {"detail", proto::load_be<std::uint32_t>(p + proto::response_offset::detail)}};
}

class WireVectorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    vectors_ = new std::vector<Vector>();
    std::ifstream in(protocol_path());
    ASSERT_TRUE(in.good()) << "cannot open " << protocol_path()
                           << " (set FLURRY_PROTOCOL_MD to proto/PROTOCOL.md)";
    *vectors_ = parse_vectors(in);
  }
  static void TearDownTestSuite() {
    delete vectors_;
    vectors_ = nullptr;
  }

  static std::vector<const Vector*> of_kind(const std::string& kind) {
    std::vector<const Vector*> found;
    for (const Vector& vector : *vectors_) {
      if (vector.one("kind") == kind) found.push_back(&vector);
    }
    return found;
  }
  static const Vector* find(const std::string& name) {
    for (const Vector& vector : *vectors_) {
      if (vector.name == name) return &vector;
    }
    return nullptr;
  }

  static std::vector<Vector>* vectors_;
};
std::vector<Vector>* WireVectorTest::vectors_ = nullptr;

TEST_F(WireVectorTest, DocumentHasEveryVector) {
  ASSERT_NE(vectors_, nullptr);
  EXPECT_GE(vectors_->size(), vectors_min) << "the parser found too few vectors";
  std::set<std::string> names;
  for (const Vector& vector : *vectors_) {
    EXPECT_FALSE(vector.name.empty());
    EXPECT_TRUE(names.insert(vector.name).second) << "duplicate vector " << vector.name;
    const std::string& kind = vector.one("kind");
    EXPECT_TRUE(kind == "server" || kind == "request" || kind == "response" || kind == "id" ||
                kind == "signed")
        << vector.name << ": unknown kind '" << kind << "'";
  }
  for (const std::string& name : required_names) {
    EXPECT_TRUE(names.count(name)) << "PROTOCOL.md lacks vector " << name;
  }
  EXPECT_GE(of_kind("request").size(), 25u);
  EXPECT_GE(of_kind("response").size(), 37u);
  EXPECT_GE(of_kind("id").size(), 7u);
}

// Every `fields:` line says exactly what its bytes say, whatever the vector decodes to; a
// vector of 20 bytes or more has one, a shorter one has none (it has no header to describe).
TEST_F(WireVectorTest, EveryFieldsLineMatchesItsBytes) {
  std::size_t checked = 0;
  for (const Vector& vector : *vectors_) {
    const std::string& kind = vector.one("kind");
    if (kind != "request" && kind != "response") continue;
    SCOPED_TRACE(vector.name);
    const std::vector<std::uint8_t> bytes = vector_bytes(vector);
    if (bytes.size() < proto::request_header_size) {
      EXPECT_FALSE(vector.has("fields")) << "a " << bytes.size() << "-byte datagram has no header";
      continue;
    }
    ASSERT_TRUE(vector.has("fields"));
    const auto fields = parse_fields(vector.one("fields"));
    const auto expected = raw_fields(kind, bytes);
    for (const auto& [name, value] : expected) {
      EXPECT_EQ(number(fields, name, vector.name), value) << "field " << name;
    }
    for (const auto& [name, text] : fields) {
      EXPECT_TRUE(expected.count(name)) << "field " << name << " is not a header field of a " << kind;
    }
    ++checked;
  }
  EXPECT_GE(checked, 60u);
}

TEST_F(WireVectorTest, EveryErrorAndStatusHasAVector) {
  std::set<std::string> request_errors;
  for (const Vector* vector : of_kind("request")) request_errors.insert(vector->one("decode"));
  // too_long needs a 1473-byte datagram; tests/proto/parser_test.cc covers it.
  for (auto error : {proto::RequestError::ok, proto::RequestError::too_short, proto::RequestError::bad_magic,
                     proto::RequestError::is_response, proto::RequestError::bad_version,
                     proto::RequestError::bad_opcode, proto::RequestError::bad_flags,
                     proto::RequestError::reserved_nonzero, proto::RequestError::count_zero,
                     proto::RequestError::count_too_large, proto::RequestError::trailing_bytes,
                     proto::RequestError::count_unexpected, proto::RequestError::trailer_short,
                     proto::RequestError::name_missing, proto::RequestError::name_too_long,
                     proto::RequestError::name_truncated, proto::RequestError::name_bad}) {
    EXPECT_TRUE(request_errors.count(std::string(proto::to_string(error))))
        << "no request vector decodes to " << proto::to_string(error);
  }
  std::set<std::uint64_t> statuses;
  std::set<std::string> response_errors;
  for (const Vector* vector : of_kind("response")) {
    response_errors.insert(vector->one("decode"));
    if (vector->one("decode") == "ok") {
      statuses.insert(number(parse_fields(vector->one("fields")), "status", vector->name));
    }
  }
  for (auto status : {proto::Status::ok, proto::Status::retry, proto::Status::bad_request,
                      proto::Status::unauthorized, proto::Status::fenced, proto::Status::unknown_sequence,
                      proto::Status::not_owner, proto::Status::exhausted}) {
    EXPECT_TRUE(statuses.count(static_cast<std::uint8_t>(status)))
        << "no response vector with status " << proto::to_string(status);
  }
  // too_long needs a 1473-byte datagram; tests/proto/parser_test.cc covers it.
  for (auto error : {proto::ResponseError::ok, proto::ResponseError::too_short,
                     proto::ResponseError::bad_magic, proto::ResponseError::bad_version,
                     proto::ResponseError::not_response, proto::ResponseError::bad_status,
                     proto::ResponseError::bad_opcode, proto::ResponseError::status_unexpected,
                     proto::ResponseError::ranges_unexpected, proto::ResponseError::ranges_missing,
                     proto::ResponseError::bad_length, proto::ResponseError::bad_range}) {
    EXPECT_TRUE(response_errors.count(std::string(proto::to_string(error))))
        << "no response vector decodes to " << proto::to_string(error);
  }
}

TEST_F(WireVectorTest, RequestVectorsDecodeAndEncode) {
  const auto requests = of_kind("request");
  ASSERT_FALSE(requests.empty());
  std::size_t encoded = 0;
  for (const Vector* vector : requests) {
    SCOPED_TRACE(vector->name);
    const std::vector<std::uint8_t> bytes = vector_bytes(*vector);
    const proto::RequestView view = proto::decode_request(bytes);
    EXPECT_EQ(proto::to_string(view.error), vector->one("decode"));
    const std::string& handling = vector->one("handling");
    ASSERT_TRUE(handling == "answered" || handling == "dropped") << handling;
    if (view.error != proto::RequestError::ok) {
      EXPECT_EQ(proto::is_answered(view.error), handling == "answered");
    } else {
      EXPECT_EQ(handling, "answered");
    }
    const auto fields = parse_fields(vector->one("fields"));
    if (view.error == proto::RequestError::ok || proto::is_answered(view.error)) {
      // Everything the server echoes or acts on must be what the document says.
      EXPECT_EQ(static_cast<std::uint8_t>(view.request.opcode), number(fields, "opcode", vector->name));
      EXPECT_EQ(view.request.flags, number(fields, "flags", vector->name));
      EXPECT_EQ(view.request.count, number(fields, "count", vector->name));
      EXPECT_EQ(view.request.request_id, number(fields, "request_id", vector->name));
    }
    const std::string& encode = vector->one("encode");
    ASSERT_TRUE(encode == "yes" || encode == "no") << encode;
    if (encode == "yes") {
      proto::Request request;
      request.opcode = static_cast<proto::Opcode>(number(fields, "opcode", vector->name));
      request.flags = static_cast<std::uint16_t>(number(fields, "flags", vector->name));
      request.count = static_cast<std::uint32_t>(number(fields, "count", vector->name));
      request.request_id = number(fields, "request_id", vector->name);
      if (vector->has("name")) {
        const std::string& name = vector->one("name");
        ASSERT_TRUE(proto::valid_seq_name(name)) << name;
        std::copy(name.begin(), name.end(), request.name.bytes.begin());
        request.name.size = static_cast<std::uint8_t>(name.size());
      }
      std::array<std::uint8_t, proto::datagram_size_max> out;
      out.fill(0xa5);  // the encoder must write every byte, padding included
      const std::size_t size = proto::encode_request(request, out, bytes.size());
      ASSERT_EQ(size, bytes.size());
      EXPECT_EQ(hex(std::span<const std::uint8_t>(out.data(), size)), hex(bytes));
      ++encoded;
    }
  }
  EXPECT_GE(encoded, 15u) << "too few request vectors were encoded";
}

TEST_F(WireVectorTest, ResponseVectorsDecodeAndEncode) {
  const auto responses = of_kind("response");
  ASSERT_FALSE(responses.empty());
  std::size_t encoded = 0;
  for (const Vector* vector : responses) {
    SCOPED_TRACE(vector->name);
    const std::vector<std::uint8_t> bytes = vector_bytes(*vector);
    const proto::ResponseView view = proto::decode_response(bytes);
    EXPECT_EQ(proto::to_string(view.error), vector->one("decode"));
    // Errors up to not_response stop before the header is decoded (EveryFieldsLineMatchesItsBytes
    // reads those raw); every later one leaves the decoded header to compare.
    const bool header_decoded =
        view.error == proto::ResponseError::ok || view.error > proto::ResponseError::not_response;
    if (!header_decoded) continue;
    const auto fields = parse_fields(vector->one("fields"));
    const proto::ResponseHeader& header = view.header;
    EXPECT_EQ(static_cast<std::uint8_t>(header.opcode), number(fields, "opcode", vector->name));
    EXPECT_EQ(static_cast<std::uint8_t>(header.status), number(fields, "status", vector->name));
    EXPECT_EQ(header.range_count, number(fields, "range_count", vector->name));
    EXPECT_EQ(header.node, number(fields, "node", vector->name));
    EXPECT_EQ(header.request_id, number(fields, "request_id", vector->name));
    EXPECT_EQ(header.detail, number(fields, "detail", vector->name));
    if (view.error != proto::ResponseError::ok) continue;

    std::vector<proto::Range> ranges;
    if (auto it = vector->values.find("range"); it != vector->values.end()) {
      for (const std::string& line : it->second) {
        const auto range_fields = parse_fields(line);
        ranges.push_back(
            proto::Range{number(range_fields, "first", vector->name),
                         static_cast<std::uint32_t>(number(range_fields, "count", vector->name))});
      }
    }
    ASSERT_EQ(ranges.size(), header.range_count);
    for (std::size_t i = 0; i < ranges.size(); ++i) EXPECT_EQ(view.range(i), ranges[i]) << i;

    std::optional<proto::Info> info;
    if (vector->has("info")) {
      const auto info_fields = parse_fields(vector->one("info"));
      proto::Info expected;
      expected.epoch_ms = number(info_fields, "epoch_ms", vector->name);
      expected.time_unit_ms = static_cast<std::uint16_t>(number(info_fields, "time_unit_ms", vector->name));
      expected.time_bits = static_cast<std::uint8_t>(number(info_fields, "time_bits", vector->name));
      expected.node_bits = static_cast<std::uint8_t>(number(info_fields, "node_bits", vector->name));
      expected.sequence_bits = static_cast<std::uint8_t>(number(info_fields, "sequence_bits", vector->name));
      expected.core_bits = static_cast<std::uint8_t>(number(info_fields, "core_bits", vector->name));
      expected.core_from = static_cast<std::uint8_t>(number(info_fields, "core_from", vector->name));
      expected.workers = static_cast<std::uint8_t>(number(info_fields, "workers", vector->name));
      ASSERT_EQ(view.body.size(), proto::info_body_size);
      EXPECT_EQ(view.info(), expected);
      info = expected;
    }

    // Encode the fields; the bytes must be the document's.
    proto::ResponseHeader encode_header;
    encode_header.opcode = static_cast<proto::Opcode>(number(fields, "opcode", vector->name));
    encode_header.status = static_cast<proto::Status>(number(fields, "status", vector->name));
    encode_header.range_count = static_cast<std::uint8_t>(number(fields, "range_count", vector->name));
    encode_header.node = static_cast<std::uint16_t>(number(fields, "node", vector->name));
    encode_header.request_id = number(fields, "request_id", vector->name);
    encode_header.detail = static_cast<std::uint32_t>(number(fields, "detail", vector->name));
    std::array<std::uint8_t, proto::datagram_size_max> out;
    out.fill(0xa5);
    std::size_t size = proto::encode_response_header(encode_header, out);
    EXPECT_EQ(size, proto::response_header_size);
    for (std::size_t i = 0; i < ranges.size(); ++i) proto::encode_range(out, i, ranges[i]);
    size += ranges.size() * proto::range_size;
    if (info) size = proto::encode_info(out, *info);
    ASSERT_EQ(size, bytes.size());
    EXPECT_EQ(hex(std::span<const std::uint8_t>(out.data(), size)), hex(bytes));
    ++encoded;
  }
  EXPECT_GE(encoded, 20u) << "too few response vectors were encoded";
}

// The handler of a `kind: server` vector: layout preset, core_from (default sequence), node,
// core, workers (which give the core bits, as flurryd derives them) and retry hint.
core::HandlerConfig server_config(const Vector& server) {
  const auto fields = parse_fields(server.one("fields"));
  core::HandlerConfig config;
  auto layout = proto::layout_preset(fields.at("layout"));
  EXPECT_TRUE(layout.has_value()) << server.name;
  if (layout) config.layout = *layout;
  const std::string core_from = fields.count("core_from") ? fields.at("core_from") : "sequence";
  EXPECT_TRUE(core_from == "sequence" || core_from == "node") << core_from;
  config.layout.core_from = core_from == "node" ? proto::CoreBitsFrom::node : proto::CoreBitsFrom::sequence;
  config.node_id = static_cast<std::uint32_t>(number(fields, "node", server.name));
  config.core = static_cast<std::uint32_t>(number(fields, "core", server.name));
  config.workers = static_cast<std::uint32_t>(number(fields, "workers", server.name));
  config.layout.core_bits = proto::core_bits_for(config.workers);
  config.retry_hint_us = static_cast<std::uint32_t>(number(fields, "retry_hint_us", server.name));
  return config;
}

// The sequences a `kind: server` vector holds (segment=, monotonic=, remote= fields), fresh.
std::unique_ptr<core::SequenceTable> server_sequences(const Vector& server) {
  const auto fields = parse_fields(server.one("fields"));
  auto table = std::make_unique<core::SequenceTable>(1);
  if (fields.count("segment")) {
    const auto slot = table->create(fields.at("segment"), core::SeqMode::segment, 1);
    EXPECT_TRUE(slot && table->push(*slot, 0,
                                    {number(fields, "segment_first", server.name),
                                     number(fields, "segment_end", server.name)}));
  }
  if (fields.count("monotonic")) {
    const auto slot = table->create(fields.at("monotonic"), core::SeqMode::monotonic, 2);
    EXPECT_TRUE(slot);
    table->take_ownership(*slot, number(fields, "monotonic_next", server.name));
    table->raise_limit(*slot, number(fields, "monotonic_limit", server.name));
  }
  if (fields.count("remote")) {
    const auto slot = table->create(fields.at("remote"), core::SeqMode::monotonic, 3);
    EXPECT_TRUE(slot);
    table->set_not_owner(*slot, static_cast<std::uint32_t>(number(fields, "remote_owner", server.name)));
  }
  return table;
}

// Every request vector sent to its reference server (`server:`, default reference_server)
// gets exactly the documented answer.
TEST_F(WireVectorTest, ReferenceServerAnswersAsDocumented) {
  std::size_t answered = 0;
  std::size_t dropped = 0;
  std::set<std::string> servers_used;
  for (const Vector* vector : of_kind("request")) {
    SCOPED_TRACE(vector->name);
    const std::string server_name = vector->has("server") ? vector->one("server") : "reference_server";
    const Vector* server = find(server_name);
    ASSERT_NE(server, nullptr) << "server vector " << server_name << " missing";
    ASSERT_EQ(server->one("kind"), "server");
    servers_used.insert(server_name);
    core::HandlerConfig config = server_config(*server);
    const std::unique_ptr<core::SequenceTable> sequences = server_sequences(*server);
    config.sequences = sequences.get();
    const auto server_fields = parse_fields(server->one("fields"));
    core::Burst burst{number(server_fields, "now_t", server_name),
                      number(server_fields, "ceiling_t", server_name)};
    if (vector->has("burst")) {
      const auto burst_fields = parse_fields(vector->one("burst"));
      burst.now_t = number(burst_fields, "now_t", vector->name);
      const std::string& ceiling = burst_fields.at("ceiling_t");
      burst.ceiling_t = ceiling == "fenced"     ? core::ceiling_fenced
                        : ceiling == "draining" ? core::ceiling_draining
                                                : number(burst_fields, "ceiling_t", vector->name);
    }
    core::WorkerStats stats;
    core::Handler handler(config, stats);
    handler.start_above(0);
    const std::vector<std::uint8_t> in = vector_bytes(*vector);
    std::array<std::uint8_t, proto::datagram_size_max> out;
    out.fill(0xa5);
    const std::size_t size = handler.handle(in, out, burst);
    const std::string& answer = vector->one("answer");
    if (answer == "none") {
      EXPECT_EQ(size, 0u);
      EXPECT_EQ(stats.get(core::Outcome::dropped), 1u);
      ++dropped;
      continue;
    }
    const Vector* expected = find(answer);
    ASSERT_NE(expected, nullptr) << "answer vector " << answer << " missing";
    EXPECT_EQ(expected->one("kind"), "response");
    EXPECT_EQ(hex(std::span<const std::uint8_t>(out.data(), size)), hex(vector_bytes(*expected)));
    EXPECT_LE(size, proto::response_size_max(in.size()));
    ++answered;
  }
  EXPECT_GE(answered, 22u);
  EXPECT_GE(dropped, 3u);
  EXPECT_EQ(servers_used.size(), of_kind("server").size()) << "a server vector no request uses";
}

// "How a client asks for N IDs", computed from the code: the worked examples' request sizes
// are request_size_for_ids of the layout's per-range capacity, the get_ids_padded vector has
// that size, and the "+ 1" range is needed: once a core has issued 4000 IDs of the current
// unit, 20000 IDs take 6 ranges (96 + 4 x 4096 + 3520), which the 31-byte request buys and a
// 27-byte (5-range) one does not.
TEST_F(WireVectorTest, RequestSizingRuleMatchesTheWorkedExamples) {
  const Vector* server = find("reference_server");
  const Vector* padded = find("get_ids_padded");
  ASSERT_TRUE(server && padded);
  const core::HandlerConfig config = server_config(*server);
  const std::uint32_t capacity = config.layout.counter_capacity();
  ASSERT_EQ(capacity, 4096u);
  const auto padded_fields = parse_fields(padded->one("fields"));
  const std::uint64_t wanted = number(padded_fields, "count", padded->name);
  ASSERT_EQ(wanted, 20000u);
  EXPECT_EQ(proto::ranges_for_ids(wanted, capacity), 6u);
  EXPECT_EQ(proto::request_size_for_ids(wanted, capacity), 31u);
  EXPECT_EQ(vector_bytes(*padded).size(), proto::request_size_for_ids(wanted, capacity));
  EXPECT_GE(proto::ranges_max(31), 6u);
  EXPECT_EQ(proto::ranges_max(30), 5u);  // one byte less buys one range less

  // 4 workers: 1024 IDs per range; 100,000 IDs -> 99 ranges -> 403 bytes -> 1209 bytes allowed.
  proto::Layout four = config.layout;
  four.core_bits = proto::core_bits_for(4);
  EXPECT_EQ(four.counter_capacity(), 1024u);
  EXPECT_EQ(proto::ranges_for_ids(100'000, four.counter_capacity()), 99u);
  EXPECT_EQ(proto::request_size_for_ids(100'000, four.counter_capacity()), 403u);
  EXPECT_EQ(proto::response_size_max(403), 1209u);
  // count_max at 4096 per range: capped at the 121 ranges of the largest datagram.
  EXPECT_EQ(proto::ranges_for_ids(proto::count_max, capacity), 121u);
  EXPECT_EQ(proto::request_size_for_ids(proto::count_max, capacity), 491u);

  const core::Burst burst{number(parse_fields(server->one("fields")), "now_t", "server"),
                          number(parse_fields(server->one("fields")), "ceiling_t", "server")};
  auto ids_for = [&](std::size_t request_size) {
    core::WorkerStats stats;
    core::Handler handler(config, stats);
    handler.start_above(0);
    std::array<std::uint8_t, proto::datagram_size_max> in{};
    std::array<std::uint8_t, proto::datagram_size_max> out{};
    proto::Request request;
    request.opcode = proto::Opcode::get_ids;
    request.count = 4000;  // another client takes the unit's first 4000 IDs
    EXPECT_GT(handler.handle(std::span<const std::uint8_t>(in.data(), proto::encode_request(request, in)),
                             out, burst),
              0u);
    request.count = static_cast<std::uint32_t>(wanted);
    const std::size_t size = proto::encode_request(request, in, request_size);
    const std::size_t answer = handler.handle(std::span<const std::uint8_t>(in.data(), size), out, burst);
    const proto::ResponseView view =
        proto::decode_response(std::span<const std::uint8_t>(out.data(), answer));
    EXPECT_EQ(view.error, proto::ResponseError::ok);
    std::uint64_t ids = 0;
    for (std::size_t i = 0; i < view.header.range_count; ++i) ids += view.range(i).count;
    return std::pair<std::uint64_t, std::size_t>{ids, view.header.range_count};
  };
  const auto [ids, ranges] = ids_for(31);
  EXPECT_EQ(ids, wanted);
  EXPECT_EQ(ranges, 6u);
  EXPECT_LT(ids_for(proto::request_size_for_ranges(5)).first, wanted);
}

TEST_F(WireVectorTest, IdVectorsDecodeAndCompose) {
  const auto ids = of_kind("id");
  ASSERT_FALSE(ids.empty());
  for (const Vector* vector : ids) {
    SCOPED_TRACE(vector->name);
    const auto layout_fields = parse_fields(vector->one("layout"));
    proto::Layout layout;
    layout.time_bits = static_cast<unsigned>(number(layout_fields, "time_bits", vector->name));
    layout.node_bits = static_cast<unsigned>(number(layout_fields, "node_bits", vector->name));
    layout.sequence_bits = static_cast<unsigned>(number(layout_fields, "sequence_bits", vector->name));
    layout.core_bits = static_cast<unsigned>(number(layout_fields, "core_bits", vector->name));
    const std::string& core_from = layout_fields.at("core_from");
    ASSERT_TRUE(core_from == "sequence" || core_from == "node") << core_from;
    layout.core_from = core_from == "node" ? proto::CoreBitsFrom::node : proto::CoreBitsFrom::sequence;
    layout.epoch_ms = number(layout_fields, "epoch_ms", vector->name);
    layout.time_unit_ms = static_cast<std::uint32_t>(number(layout_fields, "time_unit_ms", vector->name));

    const auto id = parse_number(vector->one("id"));
    const auto id_hex = parse_number(vector->one("id_hex"));
    ASSERT_TRUE(id && id_hex);
    ASSERT_EQ(vector->one("id_hex").rfind("0x", 0), 0u);
    EXPECT_EQ(*id, *id_hex) << "decimal and hex disagree";
    EXPECT_LT(*id, std::uint64_t{1} << 63);

    const auto fields = parse_fields(vector->one("fields"));
    const proto::Decoded decoded = layout.decode(*id);
    EXPECT_EQ(decoded.time, number(fields, "time", vector->name));
    EXPECT_EQ(decoded.unix_ms, number(fields, "unix_ms", vector->name));
    EXPECT_EQ(decoded.node, number(fields, "node", vector->name));
    EXPECT_EQ(decoded.core, number(fields, "core", vector->name));
    EXPECT_EQ(decoded.counter, number(fields, "counter", vector->name));
    EXPECT_EQ(layout.compose(number(fields, "time", vector->name),
                             static_cast<std::uint32_t>(number(fields, "node", vector->name)),
                             static_cast<std::uint32_t>(number(fields, "core", vector->name)),
                             static_cast<std::uint32_t>(number(fields, "counter", vector->name))),
              *id);
    EXPECT_EQ(proto::format_unix_ms(decoded.unix_ms), vector->one("utc"));
    // The layout is a valid one at the ID's own time.
    EXPECT_EQ(proto::validate(layout, decoded.node, decoded.unix_ms).message(), "");
  }
}

// Ties the document together: the first ID of the first answer is the ID vector that says so,
// and the INFO answer describes the reference server's layout.
TEST_F(WireVectorTest, VectorsAgreeWithEachOther) {
  const Vector* answer = find("get_ids_basic_answer");
  const Vector* first = find("id_snowflake_first");
  const Vector* info = find("info_answer");
  ASSERT_TRUE(answer && first && info);
  const auto answer_bytes = vector_bytes(*answer);
  const proto::ResponseView view = proto::decode_response(answer_bytes);
  ASSERT_EQ(view.error, proto::ResponseError::ok);
  ASSERT_GE(view.header.range_count, 1);
  EXPECT_EQ(view.range(0).first, parse_number(first->one("id")).value_or(0));

  const auto info_bytes = vector_bytes(*info);
  const proto::ResponseView info_view = proto::decode_response(info_bytes);
  ASSERT_EQ(info_view.error, proto::ResponseError::ok);
  const proto::Info body = info_view.info();
  const proto::Layout snowflake = proto::layout_preset("snowflake").value();
  EXPECT_EQ(body.epoch_ms, snowflake.epoch_ms);
  EXPECT_EQ(body.time_unit_ms, snowflake.time_unit_ms);
  EXPECT_EQ(body.time_bits, snowflake.time_bits);
  EXPECT_EQ(body.node_bits, snowflake.node_bits);
  EXPECT_EQ(body.sequence_bits, snowflake.sequence_bits);

  // The header's `node` is the node id that Layout::decode reports for the answer's IDs, also
  // when the core bits come from the node field (then the ID's node field is node << k | core).
  for (const char* name : {"get_ids_basic_answer", "get_ids_core_from_node_answer"}) {
    SCOPED_TRACE(name);
    const Vector* response = find(name);
    ASSERT_NE(response, nullptr);
    const Vector* request = nullptr;
    for (const Vector* candidate : of_kind("request")) {
      if (candidate->one("answer") == name) request = candidate;
    }
    ASSERT_NE(request, nullptr);
    const Vector* server = find(request->has("server") ? request->one("server") : "reference_server");
    ASSERT_NE(server, nullptr);
    const core::HandlerConfig config = server_config(*server);
    const auto bytes = vector_bytes(*response);
    const proto::ResponseView ids = proto::decode_response(bytes);
    ASSERT_EQ(ids.error, proto::ResponseError::ok);
    EXPECT_EQ(ids.header.node, config.node_id);
    for (std::size_t i = 0; i < ids.header.range_count; ++i) {
      const proto::Decoded decoded = config.layout.decode(ids.range(i).first);
      EXPECT_EQ(decoded.node, ids.header.node);
      EXPECT_EQ(decoded.core, config.core);
    }
  }
  const proto::Layout from_node = server_config(*find("reference_server_core_from_node")).layout;
  const auto answer_bytes_node = vector_bytes(*find("get_ids_core_from_node_answer"));
  const std::uint64_t first_id = proto::decode_response(answer_bytes_node).range(0).first;
  EXPECT_EQ((first_id >> from_node.sequence_bits) & ((1U << from_node.node_bits) - 1), (100U << 3) | 5U)
      << "the raw node field holds node id and core";
}

// Signed requests (kind: signed): encode_signed_request of the fields and trailer gives the
// bytes; decode reads the trailer; the reference server with the vector's key answers exactly
// the `answer:` bytes, and verify_answer accepts them (and rejects them with any byte changed).
TEST_F(WireVectorTest, SignedRequestsAndAnswersAsDocumented) {
  ASSERT_EQ(sodium_init() < 0, false);
  std::size_t checked = 0;
  for (const Vector* vector : of_kind("signed")) {
    if (!vector->has("answer")) continue;  // an answer; checked with its request
    SCOPED_TRACE(vector->name);
    const auto key_fields = parse_fields(vector->one("key"));
    const auto trailer = parse_fields(vector->one("trailer"));
    const auto fields = parse_fields(vector->one("fields"));
    proto::MacKey secret{};
    const std::string secret_hex = key_fields.at("secret");
    ASSERT_EQ(secret_hex.size(), 32u);
    for (std::size_t i = 0; i < 16; ++i)
      secret[i] = static_cast<std::uint8_t>(std::stoul(secret_hex.substr(2 * i, 2), nullptr, 16));
    const std::vector<std::uint8_t> bytes = vector_bytes(*vector);
    proto::Request request;
    request.opcode = static_cast<proto::Opcode>(number(fields, "opcode", vector->name));
    request.count = static_cast<std::uint32_t>(number(fields, "count", vector->name));
    request.request_id = number(fields, "request_id", vector->name);
    const auto key_id = static_cast<std::uint32_t>(number(trailer, "key_id", vector->name));
    const auto server = static_cast<std::uint32_t>(number(trailer, "server", vector->name));
    const std::uint64_t stamp_us = number(trailer, "timestamp_us", vector->name);
    const std::uint64_t server_clock_ms =
        number(parse_fields("m=" + vector->one("server_clock_ms")), "m", vector->name);
    std::vector<std::uint8_t> encoded(bytes.size());
    ASSERT_EQ(proto::encode_signed_request(request, encoded, bytes.size(), key_id, server, stamp_us, secret,
                                           crypto_shorthash),
              bytes.size());
    EXPECT_EQ(encoded, bytes);
    const proto::RequestView view = proto::decode_request(bytes);
    ASSERT_EQ(view.error, proto::RequestError::ok);
    EXPECT_EQ(view.trailer.key_id, key_id);
    EXPECT_EQ(view.trailer.server, server);
    EXPECT_EQ(view.trailer.timestamp_us, stamp_us);
    EXPECT_EQ(view.trailer.mac, number(trailer, "mac", vector->name));

    core::HandlerConfig config = server_config(*find("reference_server"));
    core::ReplayFilter replay(1024);
    config.auth = core::AuthConfig{core::AuthMode::required, 5000, crypto_shorthash, &replay};
    core::Key key;
    key.id = key_id;
    key.secret = secret;
    key.opcodes = (1U << 1) | (1U << 3);
    const core::KeyTable keys({key});
    const auto server_fields = parse_fields(find("reference_server")->one("fields"));
    core::Burst burst{number(server_fields, "now_t", "server"), number(server_fields, "ceiling_t", "server"),
                      server_clock_ms, &keys};
    core::WorkerStats stats;
    core::Handler handler(config, stats);
    handler.start_above(0);
    std::array<std::uint8_t, proto::datagram_size_max> out;
    const std::size_t size = handler.handle(bytes, out, burst);
    const Vector* answer = find(vector->one("answer"));
    ASSERT_NE(answer, nullptr);
    const std::vector<std::uint8_t> expected = vector_bytes(*answer);
    EXPECT_EQ(std::vector<std::uint8_t>(out.begin(), out.begin() + static_cast<long>(size)), expected);
    EXPECT_TRUE(proto::verify_answer(expected, view.trailer.mac, secret, crypto_shorthash));
    EXPECT_EQ(number(parse_fields("m=" + answer->one("request_mac")), "m", answer->name), view.trailer.mac);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      std::vector<std::uint8_t> tampered = expected;
      tampered[i] ^= 0x01;
      EXPECT_FALSE(proto::verify_answer(tampered, view.trailer.mac, secret, crypto_shorthash))
          << "byte " << i;
    }
    EXPECT_EQ(
        proto::decode_response(std::span(expected).first(expected.size() - proto::answer_mac_size)).error,
        proto::ResponseError::ok);
    ++checked;
  }
  EXPECT_EQ(checked, 4u);
}

// The parser itself: a broken parser must not pass vacuously.
TEST(WireVectorParserTest, ParsesBlocksAndIgnoresOtherFences) {
  std::istringstream text(
      "# title\n```\nnot a vector\n```\n"
      "```\nvector: a\nkind: request\nhex: 464c 01\nhex: 02\nsize: 4\n```\n"
      "text\n```\nvector: b\nkind: id\nnote: x: y\n```\n");
  const auto vectors = parse_vectors(text);
  ASSERT_EQ(vectors.size(), 2u);
  EXPECT_EQ(vectors[0].name, "a");
  EXPECT_EQ(vector_bytes(vectors[0]), (std::vector<std::uint8_t>{0x46, 0x4c, 0x01, 0x02}));
  EXPECT_EQ(vectors[1].one("note"), "x: y");
  EXPECT_EQ(parse_number("0x10"), 16u);
  EXPECT_EQ(parse_number("10"), 10u);
  EXPECT_FALSE(parse_number("0x"));
  EXPECT_FALSE(parse_number("1a"));
}

}  // namespace
}  // namespace flurry
