// tests/client/forms_vectors_test.cc — client/forms-vectors.json, the one table of ID-form
// vectors that every client (C++, C, Python, Go, Java, Node.js) checks itself against, byte for
// byte: for five layouts, IDs at the edges and seeded random ones, each in dec, hex, base32,
// readable (without and with a tag), opaque (key k1) and uuid; texts that read as an ID in
// another spelling (base32's lower case and aliases); texts each form must refuse.
//
// The table is made by this file from the C++ implementation (the reference; the opaque form's
// known answers were checked against an independent implementation, docs/forms.md), and
// this test fails when the committed file differs from what the code makes now. To write it
// again after a deliberate change: FLURRY_WRITE_FORMS_VECTORS=1 build/tests/client/client_forms_test
// --gtest_filter='FormsVectors.*', then review the diff.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "client/form_keys.h"
#include "client/forms.h"

namespace flurry::client::forms {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view key_id = "k1";
constexpr std::string_view key_secret = "000102030405060708090a0b0c0d0e0f";

struct NamedLayout {
  std::string name;
  proto::Layout layout;
};

std::vector<NamedLayout> table_layouts() {
  proto::Layout seconds{32, 10, 21, 0, proto::CoreBitsFrom::sequence, proto::default_epoch_ms, 1000};
  proto::Layout old_epoch;  // snowflake widths, epoch 1990-01-01: TIME writes the full year
  old_epoch.epoch_ms = 631'152'000'000ULL;
  proto::Layout wide_node{40, 12, 11, 0, proto::CoreBitsFrom::sequence, proto::default_epoch_ms + 777, 1};
  return {{"snowflake", proto::Layout{}},
          {"js-safe", *proto::layout_preset("js-safe")},
          {"32/10/21 at 1 s", seconds},
          {"snowflake from 1990", old_epoch},
          {"40/12/11, epoch + 777 ms", wide_node}};
}

Json layout_json(const proto::Layout& layout) {
  return Json{{"time_bits", layout.time_bits},
              {"node_bits", layout.node_bits},
              {"sequence_bits", layout.sequence_bits},
              {"time_unit_ms", layout.time_unit_ms},
              {"epoch_ms", std::to_string(layout.epoch_ms)}};
}

std::string text_of(Result<std::size_t> n, const std::array<char, text_size_max>& buffer) {
  EXPECT_TRUE(n.ok()) << (n.ok() ? "" : n.message());
  return n.ok() ? std::string(buffer.data(), *n) : std::string();
}

KeyRing key_ring() {
  const std::string toml =
      "[[key]]\nid = \"" + std::string(key_id) + "\"\nsecret = \"" + std::string(key_secret) + "\"\n";
  return *KeyRing::parse(toml, "the vectors' key");
}

// Every text the table holds, made by the C++ forms.
Json make_table() {
  const KeyRing keys = key_ring();
  Json table;
  table["about"] =
      "ID forms of flurry (README 'ID forms', client/forms.h), made by tests/client/forms_vectors_test.cc "
      "from "
      "the C++ implementation. IDs and epochs are decimal strings (a JavaScript number cannot hold them). "
      "Every client checks: each ID formats to each text, each text parses back to the ID (readable: and the "
      "tag), each 'also_reads' text parses to its ID, each 'refused' text fails.";
  table["key"] = Json{{"id", key_id}, {"secret", key_secret}};
  table["tag"] = "ORD";
  std::mt19937_64 rng(20261128);
  for (const NamedLayout& named : table_layouts()) {
    const proto::Layout& layout = named.layout;
    const ReadableForm readable = *ReadableForm::create(layout);
    const unsigned bits = layout.time_bits + layout.node_bits + layout.sequence_bits;
    const std::uint64_t top = bits == 63 ? id_max : (std::uint64_t{1} << bits) - 1;
    std::vector<std::uint64_t> ids = {0, 1, top, top - 1, layout.compose(1000, 5, 0, 7)};
    for (int i = 0; i < 12; ++i) ids.push_back(rng() >> (64 - bits));
    Json entry;
    entry["name"] = named.name;
    entry["layout"] = layout_json(layout);
    entry["ids"] = Json::array();
    for (const std::uint64_t id : ids) {
      std::array<char, text_size_max> buffer{};
      Json one;
      one["id"] = std::to_string(id);
      one["dec"] = text_of(format_dec(id, buffer), buffer);
      one["hex"] = text_of(format_hex(id, buffer), buffer);
      one["base32"] = text_of(format_base32(id, buffer), buffer);
      one["readable"] = text_of(readable.format(id, "", buffer), buffer);
      one["readable_tagged"] = text_of(readable.format(id, "ORD", buffer), buffer);
      one["opaque"] = text_of(keys.current().format(id, buffer), buffer);
      one["uuid"] = text_of(format_uuid(layout, id, buffer), buffer);
      entry["ids"].push_back(one);
    }
    // Readable and uuid texts this layout must refuse (each says why).
    const std::string some_readable = entry["ids"][4]["readable_tagged"].get<std::string>();
    const std::string some_uuid = entry["ids"][4]["uuid"].get<std::string>();
    // The month: after the year, which TIME starts with (2 digits or the full year's).
    const std::size_t fraction = layout.time_unit_ms == 1 ? 3 : layout.time_unit_ms == 10 ? 2 : 0;
    std::string bad_month = some_readable;
    bad_month.replace(readable.time_digits() - 10 - fraction, 2, "13");
    std::string wrong_version = some_uuid;
    wrong_version[14] = '4';
    std::string wrong_time = some_uuid;
    wrong_time[12] = wrong_time[12] == '0' ? '1' : '0';
    const std::string lower_tag = some_readable.substr(0, readable.time_digits()) + "ord" +
                                  some_readable.substr(readable.time_digits() + 3);
    const std::string five_char_tag = some_readable.substr(0, readable.time_digits()) + "ORDER" +
                                      some_readable.substr(readable.time_digits() + 3);
    entry["refused"] = Json{{"readable", Json::array({some_readable.substr(0, some_readable.size() - 1),
                                                      five_char_tag, lower_tag, bad_month})},
                            {"uuid", Json::array({some_uuid.substr(0, 35), wrong_version, wrong_time,
                                                  "00000000-0000-7000-c000-000000000000"})}};
    table["layouts"].push_back(entry);
  }
  // Texts that are an ID in another spelling than the one formatting writes.
  table["also_reads"] = Json::array({
      Json{{"form", "base32"}, {"text", "0000003x00m07"}, {"id", "4194324487"}},
      Json{{"form", "base32"}, {"text", "OOOOOO3XOOM07"}, {"id", "4194324487"}},
      Json{{"form", "base32"}, {"text", "0000000000001"}, {"id", "1"}},
      Json{{"form", "base32"}, {"text", "000000000000i"}, {"id", "1"}},
      Json{{"form", "base32"}, {"text", "000000000000L"}, {"id", "1"}},
      Json{{"form", "hex"}, {"text", "0XFA005007"}, {"id", "4194324487"}},
      Json{{"form", "hex"}, {"text", "0x1"}, {"id", "1"}},
      Json{{"form", "opaque"}, {"text", "K1_2tjvzn1p765y3"}, {"id", "4194324487"}},
  });
  // Texts every layout's forms refuse.
  table["refused"] = Json{
      {"dec",
       Json::array({"", "-1", "+1", "9223372036854775808", "18446744073709551616", "12a", " 1", "1 "})},
      {"hex",
       Json::array({"", "0x", "fa005007", "0x8000000000000000", "0x00000000000000001", "0xg1", "0x-1"})},
      {"base32", Json::array({"", "000000000000", "00000000000000", "8000000000000", "000000000000U",
                              "00000000000-0", "00000000000 0"})},
      {"opaque", Json::array({"k1_", "k1_2TJVZN1P765Y", "k1_2TJVZN1P765Y33", "k2_2TJVZN1P765Y3",
                              "k1-2TJVZN1P765Y3", "_2TJVZN1P765Y3", "k1_ZZZZZZZZZZZZZ"})},
  };
  return table;
}

std::string vectors_path() {
  const char* path = std::getenv("FLURRY_FORMS_VECTORS");
  return path != nullptr ? path : "client/forms-vectors.json";
}

TEST(FormsVectors, TheCommittedTableIsWhatTheCodeMakes) {
  const std::string made = make_table().dump(2) + "\n";
  if (const char* write = std::getenv("FLURRY_WRITE_FORMS_VECTORS");
      write != nullptr && std::string(write) == "1") {
    std::ofstream(vectors_path()) << made;
    GTEST_SKIP() << "wrote " << vectors_path();
  }
  std::ifstream file(vectors_path());
  ASSERT_TRUE(file) << "cannot read " << vectors_path() << " (FLURRY_FORMS_VECTORS)";
  std::stringstream committed;
  committed << file.rdbuf();
  EXPECT_EQ(committed.str(), made)
      << vectors_path() << " is not what the forms make now: FLURRY_WRITE_FORMS_VECTORS=1 writes it";
}

// The C++ client reads every text of the table back, as every other client must.
TEST(FormsVectors, EveryTextParsesBackAndEveryRefusedTextFails) {
  std::ifstream file(vectors_path());
  ASSERT_TRUE(file) << vectors_path();
  const Json table = Json::parse(file);
  const KeyRing keys = key_ring();
  std::size_t checked = 0;
  for (const Json& entry : table["layouts"]) {
    proto::Layout layout;
    layout.time_bits = entry["layout"]["time_bits"];
    layout.node_bits = entry["layout"]["node_bits"];
    layout.sequence_bits = entry["layout"]["sequence_bits"];
    layout.time_unit_ms = entry["layout"]["time_unit_ms"];
    layout.epoch_ms = std::stoull(entry["layout"]["epoch_ms"].get<std::string>());
    const ReadableForm readable = *ReadableForm::create(layout);
    const FormOptions options{&readable, {}, &keys};
    for (const Json& one : entry["ids"]) {
      const std::uint64_t id = std::stoull(one["id"].get<std::string>());
      for (const char* form : {"dec", "hex", "base32", "readable", "opaque", "uuid"}) {
        const Result<Parsed> parsed = parse_as(*parse_form(form), one[form].get<std::string>(), options);
        ASSERT_TRUE(parsed.ok()) << entry["name"] << " " << form << " " << one[form] << ": "
                                 << parsed.message();
        EXPECT_EQ(parsed->value.id, id) << form << " " << one[form];
        ++checked;
      }
      const Result<Readable> tagged = readable.parse(one["readable_tagged"].get<std::string>());
      ASSERT_TRUE(tagged.ok()) << tagged.message();
      EXPECT_EQ(tagged->id, id);
      EXPECT_EQ(tagged->tag_view(), "ORD");
    }
    for (const char* form : {"readable", "uuid"}) {
      for (const Json& text : entry["refused"][form]) {
        EXPECT_FALSE(parse_as(*parse_form(form), text.get<std::string>(), options).ok())
            << form << " " << text;
      }
    }
  }
  const ReadableForm snowflake = *ReadableForm::create(proto::Layout{});
  const FormOptions options{&snowflake, {}, &keys};
  for (const Json& also : table["also_reads"]) {
    const Result<Parsed> parsed =
        parse_as(*parse_form(also["form"].get<std::string>()), also["text"].get<std::string>(), options);
    ASSERT_TRUE(parsed.ok()) << also << ": " << parsed.message();
    EXPECT_EQ(parsed->value.id, std::stoull(also["id"].get<std::string>())) << also;
  }
  for (const auto& [form, texts] : table["refused"].items()) {
    for (const Json& text : texts) {
      EXPECT_FALSE(parse_as(*parse_form(form), text.get<std::string>(), options).ok()) << form << " " << text;
    }
  }
  EXPECT_GT(checked, 400U);
}

}  // namespace
}  // namespace flurry::client::forms
