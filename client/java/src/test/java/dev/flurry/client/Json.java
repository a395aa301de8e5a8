// client/java/.../Json.java — test-only: a small JSON reader (the JDK has none) for
// client/forms-vectors.json: objects (LinkedHashMap), arrays (List), strings (with the JSON
// escapes), numbers (as their text, a BigDecimal), true, false, null. Throws
// IllegalArgumentException naming the offset of the first thing it cannot read.
package dev.flurry.client;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Json {
  private final String text;
  private int at;

  private Json(String text) {
    this.text = text;
  }

  static Object parse(String text) {
    final Json json = new Json(text);
    final Object value = json.value();
    json.space();
    if (json.at != text.length()) throw json.error("text after the value");
    return value;
  }

  private IllegalArgumentException error(String why) {
    return new IllegalArgumentException("JSON: " + why + " at offset " + at);
  }

  private void space() {
    while (at < text.length() && " \t\r\n".indexOf(text.charAt(at)) >= 0) ++at;
  }

  private void expect(char c) {
    space();
    if (at >= text.length() || text.charAt(at) != c) throw error("expected '" + c + "'");
    ++at;
  }

  private Object value() {
    space();
    if (at >= text.length()) throw error("a value is missing");
    final char c = text.charAt(at);
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return string();
    for (String word : new String[] {"true", "false", "null"}) {
      if (text.startsWith(word, at)) {
        at += word.length();
        return word.equals("null") ? null : Boolean.valueOf(word);
      }
    }
    final int start = at;
    while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) ++at;
    if (start == at) throw error("unexpected '" + c + "'");
    return new BigDecimal(text.substring(start, at));
  }

  private Map<String, Object> object() {
    final Map<String, Object> out = new LinkedHashMap<>();
    expect('{');
    space();
    if (text.charAt(at) == '}') {
      ++at;
      return out;
    }
    for (;;) {
      space();
      final String key = string();
      expect(':');
      out.put(key, value());
      space();
      if (text.charAt(at) == '}') {
        ++at;
        return out;
      }
      expect(',');
    }
  }

  private List<Object> array() {
    final List<Object> out = new ArrayList<>();
    expect('[');
    space();
    if (text.charAt(at) == ']') {
      ++at;
      return out;
    }
    for (;;) {
      out.add(value());
      space();
      if (text.charAt(at) == ']') {
        ++at;
        return out;
      }
      expect(',');
    }
  }

  private String string() {
    expect('"');
    final StringBuilder out = new StringBuilder();
    while (at < text.length()) {
      final char c = text.charAt(at++);
      if (c == '"') return out.toString();
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (at >= text.length()) break;
      final char e = text.charAt(at++);
      switch (e) {
        case '"', '\\', '/' -> out.append(e);
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'n' -> out.append('\n');
        case 'r' -> out.append('\r');
        case 't' -> out.append('\t');
        case 'u' -> {
          if (at + 4 > text.length()) throw error("a short \\u escape");
          out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
          at += 4;
        }
        default -> throw error("an unknown escape \\" + e);
      }
    }
    throw error("a string is not closed");
  }
}
