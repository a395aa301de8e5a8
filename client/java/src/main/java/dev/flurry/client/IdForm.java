// client/java/.../IdForm.java — the six text forms of an ID (README "ID forms", client/forms.h).
package dev.flurry.client;

import java.util.Locale;

/** dec, hex, readable, base32, opaque, uuid: see {@link Forms}, ReadableForm and OpaqueKey. */
public enum IdForm {
  DEC,
  HEX,
  READABLE,
  BASE32,
  OPAQUE,
  UUID;

  /** The name the CLI and the C++ client use: "dec", "hex", "readable", ... */
  public String wireName() {
    return name().toLowerCase(Locale.ROOT);
  }

  /** The form of that name ("dec", ..., "uuid"). */
  public static IdForm of(String name) {
    for (IdForm form : values()) {
      if (form.wireName().equals(name)) return form;
    }
    throw new IllegalArgumentException("unknown ID form '" + name
        + "' (dec, hex, readable, base32, opaque, uuid)");
  }
}
