// client/java/.../ProtocolVectorsTest.java — every test vector of proto/PROTOCOL.md (path in
// the system property flurry.protocol_md), parsed at run time, one dynamic test each:
//   * request: fields: matches the header bytes; encode: yes vectors are encoded byte for
//     byte; the answer: vector is accepted by the client as the answer to this request
//     (decoding rules 13..15: same request id, opcode, never more IDs than asked);
//   * response: decodes to the named decode: result (rules 1..12) with the fields, ranges
//     and info listed; an ok one re-encodes to the same bytes;
//   * id: decodes to fields (and utc), and fields compose to the ID;
//   * server: the IDs of every answer it gave decode, with its layout, to its node and core,
//     at or after its now_t;
//   * signed: a request encodes byte for byte from its fields, key and trailer server and
//     timestamp (so the trailer and its MAC are this client's), and its answer: verifies with
//     the request's
//     MAC and decodes without its last 8 bytes as the answer to it; no answer verifies with
//     any one byte flipped, nor with another request's MAC.
// No vector is skipped: the count of each kind is printed, and the total must equal the
// document's "<!-- N vectors -->" line.
package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

@Tag("vectors")
class ProtocolVectorsTest {
  /** One fenced block: its keys in order, each with every value it was given. */
  record Vector(String name, Map<String, List<String>> keys) {
    String one(String key) {
      final List<String> values = keys.get(key);
      return values == null ? null : values.get(0);
    }

    List<String> all(String key) {
      return keys.getOrDefault(key, List.of());
    }

    byte[] bytes() {
      final String hex = String.join("", all("hex")).replace(" ", "");
      final byte[] bytes = HexFormat.of().parseHex(hex);
      assertEquals(Long.parseLong(one("size")), bytes.length, name + ": size: vs hex:");
      return bytes;
    }

    Map<String, Long> fields() {
      return pairs(one("fields"));
    }
  }

  private static List<Vector> vectors;
  private static int declaredCount;

  static synchronized List<Vector> vectors() throws IOException {
    if (vectors != null) return vectors;
    final String path = System.getProperty("flurry.protocol_md", "");
    assertFalse(path.isEmpty(), "pass proto/PROTOCOL.md as -Dflurry.protocol_md (run_tests.sh)");
    final List<String> lines = Files.readAllLines(Path.of(path), StandardCharsets.UTF_8);
    final List<Vector> found = new ArrayList<>();
    Map<String, List<String>> block = null;
    String name = null;
    for (String line : lines) {
      if (line.startsWith("```")) {
        if (block != null) found.add(new Vector(name, block));
        block = null;
        name = null;
        continue;
      }
      if (block == null && line.startsWith("vector: ")) {
        name = line.substring("vector: ".length()).trim();
        block = new LinkedHashMap<>();
        continue;
      }
      if (block != null) {
        final int colon = line.indexOf(':');
        assertTrue(colon > 0, "vector " + name + ": line without a key: " + line);
        block.computeIfAbsent(line.substring(0, colon), k -> new ArrayList<>())
            .add(line.substring(colon + 1).trim());
      }
      final Matcher declared = Pattern.compile("<!-- (\\d+) vectors -->").matcher(line);
      if (declared.find()) declaredCount = Integer.parseInt(declared.group(1));
    }
    vectors = found;
    return vectors;
  }

  static Vector byName(String name) throws IOException {
    for (Vector vector : vectors()) {
      if (vector.name().equals(name)) return vector;
    }
    fail("no vector named " + name);
    return null;
  }

  /** "a=1 b=0x2 c=sequence": numbers as longs (hex unsigned), core_from names as 0 / 1. */
  static Map<String, Long> pairs(String text) {
    final Map<String, Long> out = new LinkedHashMap<>();
    if (text == null) return out;
    for (String pair : text.trim().split("\\s+")) {
      final String[] kv = pair.split("=", 2);
      final String value = kv[1];
      final long number;
      if (value.startsWith("0x")) {
        number = Long.parseUnsignedLong(value.substring(2), 16);
      } else if (value.equals("sequence") || value.equals("node")) {
        number = value.equals("node") ? 1 : 0;
      } else if (value.chars().allMatch(Character::isDigit)) {
        number = Long.parseUnsignedLong(value);
      } else {
        number = -1; // a name (layout=snowflake, ceiling_t=fenced): read with raw()
      }
      out.put(kv[0], number);
    }
    return out;
  }

  static String raw(String text, String key) {
    for (String pair : text.trim().split("\\s+")) {
      if (pair.startsWith(key + "=")) return pair.substring(key.length() + 1);
    }
    return null;
  }

  @TestFactory
  Stream<DynamicTest> everyVector() throws IOException {
    return vectors().stream().map(v -> DynamicTest.dynamicTest(
        v.one("kind") + " " + v.name(), () -> check(v)));
  }

  /** No vector was missed by the parser, and each kind has at least one. */
  @Test
  void everyVectorIsCheckedAndCounted() throws IOException {
    final Map<String, Integer> kinds = new TreeMap<>();
    for (Vector vector : vectors()) kinds.merge(vector.one("kind"), 1, Integer::sum);
    System.out.println("vectors by kind: " + kinds + ", total " + vectors().size()
        + ", PROTOCOL.md declares " + declaredCount);
    assertTrue(vectors().size() > 0, "no vector found");
    assertEquals(declaredCount, vectors().size(), "vectors parsed vs <!-- N vectors -->");
    for (String kind : List.of("server", "request", "response", "id", "signed")) {
      assertTrue(kinds.getOrDefault(kind, 0) > 0, "no vector of kind " + kind);
    }
    assertEquals(5, kinds.size(), "a kind this test does not know: " + kinds);
  }

  static void check(Vector vector) throws IOException {
    switch (vector.one("kind")) {
      case "request" -> checkRequest(vector);
      case "response" -> checkResponse(vector);
      case "id" -> checkId(vector);
      case "server" -> checkServer(vector);
      case "signed" -> {
        if (vector.one("key") != null) {
          checkSignedRequest(vector);
        } else {
          checkSignedAnswer(vector);
        }
      }
      default -> fail(vector.name() + ": unknown kind " + vector.one("kind"));
    }
  }

  static void checkRequest(Vector vector) throws IOException {
    final byte[] bytes = vector.bytes();
    final String encode = vector.one("encode");
    assertNotNull(encode, vector.name() + ": no encode: line");
    if (bytes.length < Wire.REQUEST_HEADER_SIZE) {
      assertEquals("no", encode, vector.name());
      assertEquals(null, vector.one("fields"), vector.name() + ": fields: on a short datagram");
      return;
    }
    final Map<String, Long> fields = vector.fields();
    final ByteBuffer header = ByteBuffer.wrap(bytes);
    assertEquals(fields.get("opcode"), (long) (bytes[3] & 0xff), vector.name() + " opcode");
    assertEquals(fields.get("flags"), (long) (header.getShort(4) & 0xffff), vector.name());
    assertEquals(fields.get("count"), header.getInt(8) & 0xffffffffL, vector.name() + " count");
    assertEquals(fields.get("request_id"), header.getLong(12), vector.name() + " request_id");
    if (encode.equals("yes")) {
      final byte[] out = new byte[Wire.DATAGRAM_SIZE_MAX];
      final int size = vector.one("name") != null
          ? Wire.encodeSeqRequest(fields.get("flags").intValue(), fields.get("count"),
              fields.get("request_id"), vector.one("name"), bytes.length, out)
          : Wire.encodeRequest(fields.get("opcode").intValue(),
              fields.get("flags").intValue(), fields.get("count"), fields.get("request_id"),
              bytes.length, out);
      assertArrayEquals(bytes, java.util.Arrays.copyOf(out, size), vector.name() + ": encoded");
    } else {
      assertEquals("no", encode, vector.name());
    }
    final String answerName = vector.one("answer");
    assertNotNull(answerName, vector.name() + ": no answer: line");
    if (answerName.equals("none")) {
      assertEquals("dropped", vector.one("handling"), vector.name());
      return;
    }
    assertEquals("answered", vector.one("handling"), vector.name());
    final byte[] answer = byName(answerName).bytes();
    final Wire.Response response = Wire.decodeResponse(answer, answer.length);
    assertEquals(Wire.ResponseError.OK, response.error(), answerName);
    assertEquals(fields.get("request_id"), response.requestId(), answerName + ": rule 13");
    assertTrue(Wire.consistent(response, fields.get("opcode").intValue(), fields.get("count")),
        answerName + " is not accepted as the answer to " + vector.name() + " (rules 14, 15)");
  }

  static Key keyOf(Vector vector) {
    final String text = vector.one("key");
    assertNotNull(text, vector.name() + ": no key: line");
    return new Key(pairs(text).get("id"), HexFormat.of().parseHex(raw(text, "secret")));
  }

  static void checkSignedRequest(Vector vector) throws IOException {
    final byte[] bytes = vector.bytes();
    final Map<String, Long> fields = vector.fields();
    final Map<String, Long> trailer = pairs(vector.one("trailer"));
    final Key key = keyOf(vector);
    assertEquals(Wire.FLAG_AUTH, fields.get("flags") & Wire.FLAG_AUTH, vector.name() + " flags");
    assertEquals(key.id(), trailer.get("key_id"), vector.name() + ": trailer key_id vs key:");
    final byte[] out = new byte[Wire.DATAGRAM_SIZE_MAX];
    final int size = Auth.encodeSignedRequest(fields.get("opcode").intValue(),
        fields.get("count"), fields.get("request_id"), vector.one("name"), bytes.length, key,
        trailer.get("server"), trailer.get("timestamp_us"), out);
    assertArrayEquals(bytes, java.util.Arrays.copyOf(out, size), vector.name() + ": signed");
    final long requestMac = Auth.storedMac(bytes, bytes.length);
    assertEquals(trailer.get("mac"), requestMac, vector.name() + ": trailer mac");

    final Vector answerVector = byName(vector.one("answer"));
    final byte[] answer = answerVector.bytes();
    assertEquals(Long.parseUnsignedLong(answerVector.one("request_mac").substring(2), 16),
        requestMac, answerVector.name() + ": request_mac");
    assertTrue(Auth.verifyAnswer(answer, answer.length, requestMac, key),
        answerVector.name() + " does not verify");
    final Wire.Response response = Wire.decodeResponse(answer, answer.length - Auth.MAC_SIZE);
    assertEquals(Wire.ResponseError.OK, response.error(), answerVector.name());
    assertEquals(fields.get("request_id"), response.requestId(), answerVector.name());
    assertTrue(Wire.consistent(response, fields.get("opcode").intValue(), fields.get("count")),
        answerVector.name() + " is not accepted as the answer to " + vector.name());
    for (int i = 0; i < answer.length; ++i) {
      answer[i] ^= 0x01;
      assertFalse(Auth.verifyAnswer(answer, answer.length, requestMac, key),
          answerVector.name() + " verifies with byte " + i + " flipped");
      answer[i] ^= 0x01;
    }
    assertFalse(Auth.verifyAnswer(answer, answer.length, requestMac ^ 1, key),
        answerVector.name() + " verifies with another request's MAC");
    assertFalse(Auth.verifyAnswer(answer, answer.length - 1, requestMac, key),
        answerVector.name() + " verifies one byte short");
  }

  // A signed answer: its header fields, its answer_mac: as its last 8 bytes, and the request
  // vector that names it (which checks the MAC).
  static void checkSignedAnswer(Vector vector) throws IOException {
    final byte[] bytes = vector.bytes();
    final Map<String, Long> fields = vector.fields();
    final Wire.Response response = Wire.decodeResponse(bytes, bytes.length - Auth.MAC_SIZE);
    assertEquals(Wire.ResponseError.OK, response.error(), vector.name());
    checkHeaderFields(vector, fields, response);
    assertEquals(Long.parseUnsignedLong(vector.one("answer_mac").substring(2), 16),
        Auth.storedMac(bytes, bytes.length), vector.name() + ": answer_mac");
    assertTrue(vectors().stream().anyMatch(v -> "signed".equals(v.one("kind"))
        && vector.name().equals(v.one("answer"))), vector.name() + ": no request answers it");
  }

  // The response header's fields against the vector's fields: line.
  static void checkHeaderFields(Vector vector, Map<String, Long> fields, Wire.Response response) {
    assertEquals(fields.get("opcode"), (long) response.opcode(), vector.name() + " opcode");
    assertEquals(fields.get("status"), (long) response.status(), vector.name() + " status");
    assertEquals(fields.get("range_count"), (long) response.rangeCount(), vector.name());
    assertEquals(fields.get("node"), (long) response.node(), vector.name() + " node");
    assertEquals(fields.get("request_id"), response.requestId(), vector.name() + " request_id");
    assertEquals(fields.get("detail"), response.detail(), vector.name() + " detail");
  }

  static void checkResponse(Vector vector) throws IOException {
    final byte[] bytes = vector.bytes();
    final Wire.Response response = Wire.decodeResponse(bytes, bytes.length);
    assertEquals(vector.one("decode"), response.error().wireName(), vector.name() + ": decode");
    if (bytes.length < Wire.RESPONSE_HEADER_SIZE) {
      assertEquals(null, vector.one("fields"), vector.name() + ": fields: on a short datagram");
      return;
    }
    final Map<String, Long> fields = vector.fields();
    checkHeaderFields(vector, fields, response);
    if (response.error() != Wire.ResponseError.OK) {
      assertTrue(response.ranges().isEmpty() && response.info() == null, vector.name());
      return;
    }
    final List<Wire.Range> ranges = new ArrayList<>();
    for (String line : vector.all("range")) {
      final Map<String, Long> range = pairs(line);
      ranges.add(new Wire.Range(range.get("first"), range.get("count")));
    }
    assertEquals(ranges, response.ranges(), vector.name() + ": ranges");
    Wire.Info info = null;
    if (vector.one("info") != null) {
      final Map<String, Long> body = pairs(vector.one("info"));
      info = new Wire.Info(body.get("epoch_ms"), body.get("time_unit_ms").intValue(),
          body.get("time_bits").intValue(), body.get("node_bits").intValue(),
          body.get("sequence_bits").intValue(), body.get("core_bits").intValue(),
          body.get("core_from").intValue(), body.get("workers").intValue());
    }
    assertEquals(info, response.info(), vector.name() + ": info");
    final byte[] encoded = TestResponses.encode(response.opcode(), response.status(),
        response.node(), response.requestId(), response.detail(), ranges, info);
    assertArrayEquals(bytes, encoded, vector.name() + ": re-encoded");
  }

  static Layout layoutOf(Map<String, Long> fields) {
    return new Layout(fields.get("time_bits").intValue(), fields.get("node_bits").intValue(),
        fields.get("sequence_bits").intValue(), fields.get("core_bits").intValue(),
        fields.get("core_from") == 1 ? Layout.CoreFrom.NODE : Layout.CoreFrom.SEQUENCE,
        fields.get("epoch_ms"), fields.get("time_unit_ms").intValue());
  }

  static void checkId(Vector vector) {
    final Layout layout = layoutOf(pairs(vector.one("layout")));
    assertEquals(null, layout.check(), vector.name() + ": layout");
    final long id = Long.parseUnsignedLong(vector.one("id"));
    assertEquals(id, Long.parseUnsignedLong(vector.one("id_hex").substring(2), 16), vector.name());
    assertTrue(layout.fits(id), vector.name() + ": fits");
    final Map<String, Long> fields = vector.fields();
    final Layout.Decoded decoded = layout.decode(id);
    final Layout.Decoded expected = new Layout.Decoded(fields.get("time"), fields.get("unix_ms"),
        fields.get("node").intValue(), fields.get("core").intValue(),
        fields.get("counter").intValue());
    assertEquals(expected, decoded, vector.name() + ": decode");
    assertEquals(vector.one("utc"), decoded.utc(), vector.name() + ": utc");
    assertEquals(id, layout.compose(expected.time(), expected.node(), expected.core(),
        expected.counter()), vector.name() + ": compose");
  }

  /** The server's layout: its preset, core_from and the core bits its workers need. */
  static Layout serverLayout(Vector server) {
    final String fields = server.one("fields");
    final Layout preset = switch (raw(fields, "layout")) {
      case "snowflake" -> Layout.snowflake();
      case "js-safe" -> Layout.jsSafe();
      default -> throw new AssertionError(server.name() + ": unknown layout preset");
    };
    final long workers = server.fields().get("workers");
    int coreBits = 0;
    while ((1L << coreBits) < workers) ++coreBits;
    final String coreFrom = raw(fields, "core_from");
    return new Layout(preset.timeBits, preset.nodeBits, preset.sequenceBits, coreBits,
        "node".equals(coreFrom) ? Layout.CoreFrom.NODE : Layout.CoreFrom.SEQUENCE,
        preset.epochMs, preset.timeUnitMs);
  }

  static void checkServer(Vector server) throws IOException {
    final Layout layout = serverLayout(server);
    assertEquals(null, layout.check(), server.name() + ": layout");
    final Map<String, Long> fields = server.fields();
    int answersWithIds = 0;
    for (Vector request : vectors()) {
      if (!"request".equals(request.one("kind"))) continue;
      final String servedBy = request.one("server") == null ? "reference_server"
          : request.one("server");
      final String answerName = request.one("answer");
      if (!servedBy.equals(server.name()) || answerName == null || answerName.equals("none")) {
        continue;
      }
      final byte[] answer = byName(answerName).bytes();
      final Wire.Response response = Wire.decodeResponse(answer, answer.length);
      assertEquals(fields.get("node"), (long) response.node(), answerName + ": header node");
      if (response.opcode() == Wire.Opcode.GET_SEQ.code) { // sequence numbers, not Snowflake IDs
        answersWithIds += response.ranges().size();
        continue;
      }
      for (Wire.Range range : response.ranges()) {
        assertTrue(range.count() <= layout.counterCapacity(), answerName + ": range too big");
        final Layout.Decoded first = layout.decode(range.first());
        final Layout.Decoded last = layout.decode(range.first() + range.count() - 1);
        assertEquals(fields.get("node"), (long) first.node(), answerName + ": ID node");
        assertEquals(fields.get("core"), (long) first.core(), answerName + ": ID core");
        assertTrue(first.time() >= fields.get("now_t"), answerName + ": ID before now_t");
        assertEquals(first.time(), last.time(), answerName + ": a range crosses a time unit");
        ++answersWithIds;
      }
    }
    assertTrue(answersWithIds > 0, server.name() + " served no vector with IDs");
  }
}
