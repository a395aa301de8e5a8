// client/java/.../FormsVectorsTest.java — every ID form against client/forms-vectors.json (made
// by the C++ implementation; path from FLURRY_FORMS_VECTORS, else ../forms-vectors.json
// relative to client/java), read at run time: every ID of every layout formats to every text
// byte for byte (by the form's own function and by Forms.format), every text parses back to
// the ID (readable: with its tag; by the form's parser, Forms.parse and, where unambiguous,
// Forms.parseAny), java.util.UUID reads every uuid text as version 7 with the RFC 9562 variant
// (2) and the same UUID, every also_reads text parses to its ID, every refused text fails.
// Nothing is skipped: the counts are checked against the file's.
package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

@Tag("vectors")
class FormsVectorsTest {
  private static Map<String, Object> vectors;

  @SuppressWarnings("unchecked")
  static synchronized Map<String, Object> vectors() throws IOException {
    if (vectors == null) {
      vectors = (Map<String, Object>) Json.parse(
          Files.readString(Paths.formsVectors(), StandardCharsets.UTF_8));
    }
    return vectors;
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> map(Object value) {
    return (Map<String, Object>) value;
  }

  @SuppressWarnings("unchecked")
  private static List<Object> list(Object value) {
    return (List<Object>) value;
  }

  private static long id(Object text) {
    return Long.parseLong((String) text);
  }

  static KeyRing keys() throws IOException {
    final Map<String, Object> key = map(vectors().get("key"));
    return KeyRing.of(new OpaqueKey((String) key.get("id"),
        HexFormat.of().parseHex((String) key.get("secret"))));
  }

  static Layout layoutOf(Map<String, Object> entry) {
    final Map<String, Object> layout = map(entry.get("layout"));
    return new Layout(((Number) layout.get("time_bits")).intValue(),
        ((Number) layout.get("node_bits")).intValue(),
        ((Number) layout.get("sequence_bits")).intValue(), 0, Layout.CoreFrom.SEQUENCE,
        id(layout.get("epoch_ms")), ((Number) layout.get("time_unit_ms")).intValue());
  }

  @TestFactory
  Stream<DynamicTest> everyLayoutsIdsFormatAndParseBack() throws IOException {
    final List<DynamicTest> tests = new ArrayList<>();
    for (Object entry : list(vectors().get("layouts"))) {
      final Map<String, Object> layoutEntry = map(entry);
      tests.add(DynamicTest.dynamicTest("layout " + layoutEntry.get("name"),
          () -> checkLayout(layoutEntry)));
    }
    assertEquals(5, tests.size(), "layouts in the file");
    return tests.stream();
  }

  static void checkLayout(Map<String, Object> entry) throws IOException {
    final String name = (String) entry.get("name");
    final Layout layout = layoutOf(entry);
    final ReadableForm readable = ReadableForm.of(layout);
    final KeyRing keys = keys();
    final String tag = (String) vectors().get("tag");
    final Forms.Options plain = new Forms.Options(readable, "", keys);
    final Forms.Options tagged = new Forms.Options(readable, tag, keys);
    int checked = 0;
    int read = 0; // by parseAny
    for (Object item : list(entry.get("ids"))) {
      final Map<String, Object> v = map(item);
      final long id = id(v.get("id"));
      final String where = name + " ID " + id + ": ";
      // Formatting, byte for byte.
      assertEquals(v.get("dec"), Forms.dec(id), where + "dec");
      assertEquals(v.get("hex"), Forms.hex(id), where + "hex");
      assertEquals(v.get("base32"), Forms.base32(id), where + "base32");
      assertEquals(v.get("readable"), readable.format(id, ""), where + "readable");
      assertEquals(v.get("readable_tagged"), readable.format(id, tag), where + "readable tagged");
      assertEquals(v.get("opaque"), keys.current().format(id), where + "opaque");
      assertEquals(v.get("uuid"), Forms.uuid(layout, id), where + "uuid");
      for (IdForm form : IdForm.values()) {
        assertEquals(v.get(form.wireName()), Forms.format(form, id, plain), where + form);
      }
      assertEquals(v.get("readable_tagged"), Forms.format(IdForm.READABLE, id, tagged), where);
      // Parsing back.
      assertEquals(id, Forms.parseDec((String) v.get("dec")), where + "dec");
      assertEquals(id, Forms.parseHex((String) v.get("hex")), where + "hex");
      assertEquals(id, Forms.parseBase32((String) v.get("base32")), where + "base32");
      assertEquals(new ReadableForm.Readable(id, ""), readable.parse((String) v.get("readable")),
          where + "readable");
      assertEquals(new ReadableForm.Readable(id, tag),
          readable.parse((String) v.get("readable_tagged")), where + "readable tagged");
      assertEquals(id, keys.decode((String) v.get("opaque")), where + "opaque");
      assertEquals(id, Forms.parseUuid(layout, (String) v.get("uuid")), where + "uuid");
      for (IdForm form : IdForm.values()) {
        final Forms.Parsed parsed = Forms.parse(form, (String) v.get(form.wireName()), plain);
        assertEquals(id, parsed.id(), where + form);
        assertEquals(form, parsed.form(), where + form);
      }
      final Forms.Parsed taggedParsed =
          Forms.parse(IdForm.READABLE, (String) v.get("readable_tagged"), plain);
      assertEquals(tag, taggedParsed.tag(), where);
      assertEquals("k1", Forms.parse(IdForm.OPAQUE, (String) v.get("opaque"), plain).keyId());
      // parseAny reads every text, or says which two forms read it (a 13-digit dec is also
      // base32; a 19-char js-safe readable is also dec).
      for (String field : List.of("dec", "hex", "base32", "readable", "readable_tagged",
          "opaque", "uuid")) {
        final String text = (String) v.get(field);
        try {
          assertEquals(id, Forms.parseAny(text, plain).id(), where + field);
          ++read;
        } catch (IllegalArgumentException e) {
          assertTrue(e.getMessage().startsWith("'" + text + "' reads as ")
              && e.getMessage().endsWith("; say which form it is"), e.getMessage());
        }
      }
      // java.util.UUID reads the uuid form as version 7, variant 2 (RFC 9562), the same UUID.
      final UUID uuid = UUID.fromString((String) v.get("uuid"));
      assertEquals(7, uuid.version(), where + "UUID version");
      assertEquals(2, uuid.variant(), where + "UUID variant");
      assertEquals(uuid, Forms.toUuid(layout, id), where + "toUuid");
      assertEquals(id, Forms.fromUuid(layout, uuid), where + "fromUuid");
      assertEquals(layout.decode(id).unixMs(), uuid.getMostSignificantBits() >>> 16,
          where + "the UUID's unix_ts_ms is the ID's instant");
      ++checked;
    }
    assertEquals(17, checked, name + ": IDs in the file");
    assertTrue(read >= 5 * checked, name + ": parseAny read " + read + " texts");
    // This layout's refused readable and uuid texts.
    final Map<String, Object> refused = map(entry.get("refused"));
    int refusedCount = 0;
    for (Object text : list(refused.get("readable"))) {
      assertThrows(IllegalArgumentException.class, () -> readable.parse((String) text),
          name + ": readable " + text + " was read");
      ++refusedCount;
    }
    for (Object text : list(refused.get("uuid"))) {
      assertThrows(IllegalArgumentException.class, () -> Forms.parseUuid(layout, (String) text),
          name + ": uuid " + text + " was read");
      ++refusedCount;
    }
    assertEquals(8, refusedCount, name + ": refused texts");
  }

  @Test
  void alsoReadsTextsParseToTheirIds() throws IOException {
    final Forms.Options options = new Forms.Options(null, "", keys());
    int checked = 0;
    for (Object item : list(vectors().get("also_reads"))) {
      final Map<String, Object> v = map(item);
      final IdForm form = IdForm.of((String) v.get("form"));
      assertEquals(id(v.get("id")), Forms.parse(form, (String) v.get("text"), options).id(),
          v.toString());
      ++checked;
    }
    assertEquals(8, checked);
  }

  @Test
  void refusedTextsFail() throws IOException {
    final Forms.Options options = new Forms.Options(null, "", keys());
    final Map<String, Object> refused = map(vectors().get("refused"));
    int checked = 0;
    for (Map.Entry<String, Object> forms : refused.entrySet()) {
      final IdForm form = IdForm.of(forms.getKey());
      for (Object text : list(forms.getValue())) {
        final IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> Forms.parse(form, (String) text, options), form + " read '" + text + "'");
        assertFalse(e.getMessage().isEmpty());
        ++checked;
      }
    }
    assertEquals(29, checked, "refused texts in the file");
  }

  // The known answers of README "ID forms" and client/forms.h.
  @Test
  void opaqueKnownAnswers() {
    final OpaqueKey key = new OpaqueKey("k1",
        HexFormat.of().parseHex("000102030405060708090a0b0c0d0e0f"));
    assertEquals(7704551156889774887L, key.encrypt(0));
    assertEquals(7614573489595586949L, key.encrypt(1));
    assertEquals(3263842716310771651L, key.encrypt(4194324487L));
    assertEquals("k1_2TJVZN1P765Y3", key.format(4194324487L));
    for (long x : new long[] {0, 1, 4194324487L, Forms.ID_MAX, 1L << 62, 12345678901234L}) {
      assertEquals(x, key.decrypt(key.encrypt(x)));
      assertTrue(key.encrypt(x) >= 0);
    }
    assertEquals("OpaqueKey(id=k1)", key.toString());
  }
}
