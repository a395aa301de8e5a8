"""The text forms of a flurry ID, as the C++ client/forms.h and client/form_keys.h define them
(README "ID forms"); checked byte for byte against client/forms-vectors.json.

  dec       decimal, no padding: "4194324487". Reads 1..19 digits (below 2^63).
  hex       "0x" + 16 lower-case hex digits: "0x00000000fa005007". Reads 1..16 digits after
            0x or 0X, either case.
  base32    Crockford base32, 13 symbols, upper case: "0000003X00M07". Fixed width, alphabet in
            ASCII order, so text order == numeric order. Reads lower case and the aliases I, L
            (= 1) and O (= 0); refuses U, another length and values of 2^63 or more.
  readable  TIME TAG REST (ReadableForm): "240101000001000" "ORD" "0020487" for the default
            layout; needs the layout (Client.layout(), or a Layout).
  opaque    a keyed permutation of [0, 2^63) (OpaqueKey): "k1_2TJVZN1P765Y3"; keys from a key
            file (KeyRing.load: TOML, mode 0600 or stricter, `current` encodes, every key decodes).
  uuid      an RFC 9562 version-7 UUID carrying the whole ID (format_uuid): sorts by time,
            decodes back exactly; uuid.UUID reads it as version 7, variant RFC 4122 (= 9562).

Contract: pure functions of their arguments (ReadableForm, OpaqueKey and KeyRing are immutable
once made; safe to share between threads). Every failure is a FormError (an
InvalidArgumentError and a ValueError) with one sentence saying what is wrong with the input.
IDs are ints in 0..ID_MAX.
"""

from __future__ import annotations

import enum
import os
import re
import stat
import tomllib
from dataclasses import dataclass
from typing import Iterable

from .auth import siphash24
from .layout import Layout, days_from_civil, format_unix_ms, utc_fields
from .options import InvalidArgumentError

ID_MAX = (1 << 63) - 1
DEC_SIZE_MAX = 19
HEX_SIZE = 18
BASE32_SIZE = 13
UUID_SIZE = 36
TAG_SIZE_MAX = 4
KEY_ID_SIZE_MAX = 8
OPAQUE_ROUNDS = 10
OPAQUE_SECRET_SIZE = 16
KEY_FILE_SIZE_MAX = 64 * 1024
KEY_COUNT_MAX = 64

# Known answers with the key 000102030405060708090a0b0c0d0e0f, id "k1" (forms.h).
OPAQUE_KNOWN_ANSWER_OF_0 = 7704551156889774887
OPAQUE_KNOWN_ANSWER_OF_1 = 7614573489595586949
OPAQUE_KNOWN_ANSWER_OF_KNOWN_ID = 3263842716310771651  # of 4194324487
OPAQUE_KNOWN_TEXT_OF_KNOWN_ID = "k1_2TJVZN1P765Y3"


class FormError(InvalidArgumentError, ValueError):
    """Text that is not an ID of the form asked, an ID that has no such form, or a key or key
    file that cannot be used."""


class Form(str, enum.Enum):
    DEC = "dec"
    HEX = "hex"
    READABLE = "readable"
    BASE32 = "base32"
    OPAQUE = "opaque"
    UUID = "uuid"


def parse_form(name: str | Form) -> Form:
    """The Form named "dec", "hex", "readable", "base32", "opaque" or "uuid"."""
    try:
        return Form(name)
    except ValueError:
        raise FormError(f"unknown form {str(name)[:48]!r}: dec, hex, readable, base32, opaque "
                        "or uuid") from None


# ---- helpers ----

_DIGITS = frozenset("0123456789")
_HEX_DIGITS = "0123456789abcdef"
_HEX_VALUE = {c: int(c, 16) for c in "0123456789abcdefABCDEF"}
# Crockford's alphabet: digits, then letters without I, L, O, U; in ASCII order.
_BASE32_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_BASE32_VALUE = {**{c: i for i, c in enumerate(_BASE32_ALPHABET)},
                 **{c.lower(): i for i, c in enumerate(_BASE32_ALPHABET)},
                 "I": 1, "i": 1, "L": 1, "l": 1, "O": 0, "o": 0}
_TAG_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_KEY_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_KEY_ID_CHARS_ANY_CASE = _KEY_ID_CHARS | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _quoted(text: str) -> str:
    """Untrusted text for a message, cut to a readable length."""
    shown_max = 48
    return "'" + text[:shown_max] + ("...'" if len(text) > shown_max else "'")


def _text(text: object) -> str:
    if not isinstance(text, str):
        raise FormError(f"an ID's text must be a str, not {type(text).__name__}")
    return text


def _read_digits(text: str) -> int | None:
    """1..19 ASCII decimal digits and nothing else (no sign, space, '_' or other digits)."""
    if not 1 <= len(text) <= DEC_SIZE_MAX or not set(text) <= _DIGITS:
        return None
    return int(text)


def _check_id(id_: int) -> int:
    if not isinstance(id_, int) or isinstance(id_, bool):
        raise FormError(f"an ID must be an int, not {type(id_).__name__}")
    if id_ < 0:
        raise FormError(f"ID {id_} is negative")
    if id_ > ID_MAX:
        raise FormError(f"ID {id_} is 2^63 or more")
    return id_


def _check_tag(tag: str) -> None:
    if not isinstance(tag, str):
        raise FormError(f"a tag must be a str, not {type(tag).__name__}")
    if len(tag) > TAG_SIZE_MAX:
        raise FormError(f"tag {_quoted(tag)} is longer than 4 chars")
    if not set(tag) <= _TAG_CHARS:
        raise FormError(f"tag {_quoted(tag)} may hold only A-Z and 0-9")


# ---- dec, hex, base32 ----

def format_dec(id_: int) -> str:
    return str(_check_id(id_))


def format_hex(id_: int) -> str:
    return f"0x{_check_id(id_):016x}"


def _base32(value: int) -> str:
    """13 symbols of any value below 2^65 (the opaque form writes its permuted number)."""
    return "".join(_BASE32_ALPHABET[(value >> (5 * (BASE32_SIZE - 1 - i))) & 31]
                   for i in range(BASE32_SIZE))


def format_base32(id_: int) -> str:
    return _base32(_check_id(id_))


def parse_dec(text: str) -> int:
    value = _read_digits(_text(text))
    if value is None or value > ID_MAX:
        raise FormError(f"{_quoted(text)} is not a decimal ID (1 to 19 digits, below 2^63)")
    return value


def parse_hex(text: str) -> int:
    text = _text(text)
    digits = text[2:]
    if (len(text) <= 2 or len(text) > HEX_SIZE or text[0] != "0" or text[1] not in "xX"
            or not all(c in _HEX_VALUE for c in digits) or int(digits, 16) > ID_MAX):
        raise FormError(f"{_quoted(text)} is not a hexadecimal ID (0x and 1 to 16 hex digits, "
                        "below 2^63)")
    return int(digits, 16)


def parse_base32(text: str) -> int:
    text = _text(text)
    if len(text) != BASE32_SIZE:
        raise FormError(f"{_quoted(text)} is not base32: it has {len(text)} chars, a base32 ID "
                        "has 13")
    value = 0
    for i, char in enumerate(text):
        symbol = _BASE32_VALUE.get(char)
        if symbol is None:
            raise FormError(f"{_quoted(text)} is not base32: {char!r} at position {i + 1} is "
                            "not a Crockford symbol (0-9, A-Z but U)")
        # 13 symbols carry 65 bits; an ID's 63 leave the first symbol 0..7.
        if i == 0 and symbol > 7:
            raise FormError(f"{_quoted(text)} is not base32 of an ID: it is 2^63 or more (the "
                            "first symbol must be 0-7)")
        value = value << 5 | symbol
    return value


def check_fits(layout: Layout, id_: int) -> None:
    """FormError unless `id_` fits the layout's time + node + sequence bits."""
    if id_ >> layout.id_bits:
        raise FormError(f"ID {id_} has bits above the layout's {layout.id_bits} bits; is it "
                        "from another layout?")


# ---- uuid ----
#
# RFC 9562 version 7, 128 bits, most significant first: unix_ts_ms (48 bits: the ID's instant,
# the layout's epoch + its time field x unit), ver (4: 7), then rand_a (12), var (2: 0b10) and
# rand_b (62), whose 74 bits hold the 63-bit ID in their low 63 bits (the 11 above it 0).
# Written as 8-4-4-4-12 lower-case hex digits. 48 bits of milliseconds reach the year 10889.

_UUID_VERSION = 7
_UUID_VARIANT = 0b10
_UUID_DASHES = (8, 13, 18, 23)
_LOW_62 = (1 << 62) - 1


def format_uuid(layout: Layout, id_: int) -> str:
    """FormError when `id_` does not fit the layout or its instant is past 2^48 ms."""
    check_fits(layout, _check_id(id_))
    unix_ms = layout.decode(id_).unix_ms
    if unix_ms >> 48:
        raise FormError(f"ID {id_} is of {format_unix_ms(unix_ms)}, past what a UUID's 48 bits "
                        "of milliseconds hold (the year 10889)")
    hi = unix_ms << 16 | _UUID_VERSION << 12 | id_ >> 62
    lo = _UUID_VARIANT << 62 | id_ & _LOW_62
    digits = f"{hi:016x}{lo:016x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def parse_uuid(layout: Layout, text: str) -> int:
    """Either case. FormError naming the first thing wrong: length, a dash or hex digit out of
    place, the version or variant, the bits above the ID not 0, an ID that does not fit the
    layout, or a time that is not the ID's instant in this layout."""
    text = _text(text)
    if len(text) != UUID_SIZE:
        raise FormError(f"{_quoted(text)} is not a UUID: it has {len(text)} chars, a UUID has "
                        "36 (8-4-4-4-12 hex digits)")
    value = 0
    for i, char in enumerate(text):
        if i in _UUID_DASHES:
            if char != "-":
                raise FormError(f"{_quoted(text)} is not a UUID: position {i + 1} must be '-'")
            continue
        digit = _HEX_VALUE.get(char)
        if digit is None:
            raise FormError(f"{_quoted(text)} is not a UUID: {char!r} at position {i + 1} is "
                            "not a hex digit")
        value = value << 4 | digit
    hi, lo = value >> 64, value & ((1 << 64) - 1)
    if (hi >> 12) & 0xF != _UUID_VERSION:
        raise FormError(f"{_quoted(text)} is not a flurry UUID: its version is "
                        f"{(hi >> 12) & 0xF}, flurry writes version 7")
    if lo >> 62 != _UUID_VARIANT:
        raise FormError(f"{_quoted(text)} is not a flurry UUID: its variant is not RFC 9562's "
                        "(10 in binary)")
    if (hi >> 1) & 0x7FF:
        raise FormError(f"{_quoted(text)} is not a flurry UUID: the 11 bits above the ID are "
                        "not 0")
    id_ = (hi & 1) << 62 | lo & _LOW_62
    try:
        check_fits(layout, id_)
    except FormError as error:
        raise FormError(f"{_quoted(text)} is not a UUID of this layout: {error}") from None
    unix_ms, expected_ms = hi >> 16, layout.decode(id_).unix_ms
    if unix_ms != expected_ms:
        raise FormError(f"{_quoted(text)} is not a UUID of this layout: its time is "
                        f"{format_unix_ms(unix_ms)}, the ID inside it is of "
                        f"{format_unix_ms(expected_ms)} (another epoch or layout?)")
    return id_


# ---- readable ----

@dataclass(frozen=True)
class Readable:
    """A readable text read back: the ID and the tag it carried ("" for none)."""

    id: int
    tag: str = ""


class ReadableForm:
    """TIME TAG REST, no delimiters, every part fixed width for one layout:
      TIME  the ID's instant in UTC, truncated to the layout's unit: YY MM DD HH mm ss, then
            SSS (1 ms unit), SS (hundredths: 10 ms) or nothing (1 s). YY is two digits when the
            whole layout (epoch to its last instant) lies in 2000..2099; otherwise the full
            year, zero-padded to the digits of the layout's last year (at least 4).
      TAG   0..4 chars of A-Z 0-9, given by the caller (e.g. "ORD").
      REST  the bits below the time field (node, core, counter) as one decimal number,
            zero-padded to the digits of its largest value (7 for the snowflake layout).
    For one tag, text order == numeric order of the IDs."""

    def __init__(self, layout: Layout):
        """FormError when the layout fails the layout rules (clock checks aside)."""
        if not isinstance(layout, Layout):
            raise FormError(f"the readable form needs a flurry_client.Layout, not "
                            f"{type(layout).__name__}")
        problem = layout.validate()
        if problem is not None:
            raise FormError(f"readable form: {problem}")
        self._layout = layout
        first_year, last_year = utc_fields(layout.epoch_ms)[0], utc_fields(layout.end_unix_ms())[0]
        self._year_digits = (2 if first_year >= 2000 and last_year <= 2099
                             else max(4, len(str(last_year))))
        self._fraction_digits = {1: 3, 10: 2}.get(layout.time_unit_ms, 0)
        self._rest_bits = layout.node_bits + layout.sequence_bits
        self._rest_digits = len(str((1 << self._rest_bits) - 1))

    @property
    def layout(self) -> Layout:
        return self._layout

    @property
    def time_digits(self) -> int:
        return self._year_digits + 10 + self._fraction_digits

    def size(self, tag_size: int = 0) -> int:
        """The length of a readable text with a tag of `tag_size` chars."""
        return self.time_digits + tag_size + self._rest_digits

    def format(self, id_: int, tag: str = "") -> str:
        """FormError when the tag is not 0..4 chars of A-Z 0-9 or the ID does not fit."""
        check_fits(self._layout, _check_id(id_))
        _check_tag(tag)
        unix_ms = self._layout.decode(id_).unix_ms
        year, month, day, hour, minute, second, ms = utc_fields(unix_ms)
        if self._year_digits == 2:
            year -= 2000
        fraction = (f"{ms // _POW10[3 - self._fraction_digits]:0{self._fraction_digits}d}"
                    if self._fraction_digits else "")
        rest = id_ & ((1 << self._rest_bits) - 1)
        return (f"{year:0{self._year_digits}d}{month:02d}{day:02d}{hour:02d}{minute:02d}"
                f"{second:02d}{fraction}{tag}{rest:0{self._rest_digits}d}")

    def parse(self, text: str) -> Readable:
        """FormError naming the first thing wrong: length, a non-digit, a date field out of
        range, a tag char, a REST above the layout's bits, an instant outside the layout."""
        text = _text(text)
        bare = self.size(0)
        if not bare <= len(text) <= bare + TAG_SIZE_MAX:
            raise FormError(f"{_quoted(text)} is not a readable ID of this layout: it has "
                            f"{len(text)} chars, not {bare} to {bare + TAG_SIZE_MAX}")
        tag_size = len(text) - bare
        tag = text[self.time_digits:self.time_digits + tag_size]
        rest_text = text[self.time_digits + tag_size:]
        try:
            time = self._parse_time(text[:self.time_digits])
            _check_tag(tag)
        except FormError as error:
            raise FormError(f"{_quoted(text)} is not a readable ID: {error}") from None
        rest = _read_digits(rest_text)
        if rest is None or rest >> self._rest_bits:
            raise FormError(f"{_quoted(text)} is not a readable ID: its last "
                            f"{self._rest_digits} chars must be a number below 2^"
                            f"{self._rest_bits}")
        return Readable(time << self._rest_bits | rest, tag)

    def _parse_time(self, digits: str) -> int:
        """The time field of TIME digits (their length already checked)."""
        widths = (self._year_digits, 2, 2, 2, 2, 2, self._fraction_digits)
        fields = []
        at = 0
        for width in widths:
            value = _read_digits(digits[at:at + width]) if width else 0
            if value is None:
                raise FormError(f"its first {self.time_digits} chars (the time) must be digits")
            fields.append(value)
            at += width
        year, month, day, hour, minute, second, fraction = fields
        if self._year_digits == 2:
            year += 2000
        real = (year >= 1970 and 1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)
                and hour <= 23 and minute <= 59 and second <= 59)
        if not real:
            raise FormError(f"its time {digits} is not a real UTC date and time")
        seconds = (days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60
                   + second)
        unix_ms = seconds * 1000 + fraction * _POW10[3 - self._fraction_digits]
        layout = self._layout
        unit = layout.time_unit_ms
        first_unit = layout.epoch_ms // unit
        if unix_ms // unit < first_unit or unix_ms // unit - first_unit > layout.time_max:
            raise FormError(f"its time {format_unix_ms(unix_ms)} is outside the layout "
                            f"({format_unix_ms(layout.epoch_ms)} to "
                            f"{format_unix_ms(layout.end_unix_ms())})")
        return unix_ms // unit - first_unit


_POW10 = (1, 10, 100, 1000)


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


# ---- opaque ----
#
# An unbalanced Feistel network of OPAQUE_ROUNDS rounds over a 31-bit left half L (bits 62..32)
# and a 32-bit right half R (bits 31..0). Round i maps (L, R) of widths (a, b) to
# (R, L xor F_i(R) mod 2^a), so the widths swap every round and, the rounds being even, end as
# (31, 32) again. F_i(R) = SipHash-2-4(secret, LE64(R | i << 32 | 0x66 << 56)) read as a
# little-endian number (0x66 = 'f', a domain byte). Each round is invertible, so the whole is
# a permutation of [0, 2^63); decrypt runs the rounds backwards.

_HALF_RIGHT_BITS = 32
_DOMAIN_BYTE = 0x66


def _left_bits_before(round_: int) -> int:
    return 63 - _HALF_RIGHT_BITS if round_ % 2 == 0 else _HALF_RIGHT_BITS


class OpaqueKey:
    """A key of the opaque form: its id (1..8 chars of a-z 0-9, written before the '_') and
    its 16-byte secret (not all zero)."""

    def __init__(self, id: str, secret: bytes):
        if (not isinstance(id, str) or not 1 <= len(id) <= KEY_ID_SIZE_MAX
                or not set(id) <= _KEY_ID_CHARS):
            raise FormError(f"key id {_quoted(str(id))} must be 1 to 8 chars of a-z and 0-9")
        if not isinstance(secret, (bytes, bytearray)) or len(secret) != OPAQUE_SECRET_SIZE:
            raise FormError(f"key {id}: the secret must be {OPAQUE_SECRET_SIZE} bytes")
        if not any(secret):
            raise FormError(f"key {id}: the secret is all zero; generate one with: head -c 16 "
                            "/dev/urandom | xxd -p")
        self._id = id
        self._secret = bytes(secret)

    def __repr__(self) -> str:  # a secret never ends up in a log line or a traceback
        return f"OpaqueKey(id={self._id!r}, secret=<{len(self._secret)} bytes>)"

    @property
    def id(self) -> str:
        return self._id

    def has_id(self, id: str) -> bool:
        """Whether `id` is this key's id, ignoring case (ASCII)."""
        return len(id) == len(self._id) and id.isascii() and id.lower() == self._id

    def _round(self, round_: int, half: int) -> int:
        message = half | round_ << 32 | _DOMAIN_BYTE << 56
        return int.from_bytes(siphash24(self._secret, message.to_bytes(8, "little")), "little")

    def encrypt(self, x: int) -> int:
        """x in 0..ID_MAX to a value in 0..ID_MAX; decrypt(encrypt(x)) == x."""
        _check_id(x)
        left, right = x >> _HALF_RIGHT_BITS, x & 0xFFFF_FFFF
        for round_ in range(OPAQUE_ROUNDS):
            mask = (1 << _left_bits_before(round_)) - 1
            left, right = right, (left ^ self._round(round_, right)) & mask
        return left << _HALF_RIGHT_BITS | right

    def decrypt(self, y: int) -> int:
        _check_id(y)
        left, right = y >> _HALF_RIGHT_BITS, y & 0xFFFF_FFFF
        for round_ in reversed(range(OPAQUE_ROUNDS)):
            mask = (1 << _left_bits_before(round_)) - 1
            left, right = (right ^ self._round(round_, left)) & mask, left
        return left << _HALF_RIGHT_BITS | right

    def format(self, id_: int) -> str:
        """"<key id>_<13 base32 chars of encrypt(id_)>"."""
        return f"{self._id}_{_base32(self.encrypt(id_))}"


def opaque_key_id(text: str) -> str:
    """The key id of an opaque text ("k1" of "k1_2TJVZN1P765Y3"), as written; FormError when
    the text is not KEYID_ and 13 base32 chars."""
    text = _text(text)
    separator = text.find("_")
    if (separator <= 0 or separator > KEY_ID_SIZE_MAX
            or len(text) != separator + 1 + BASE32_SIZE
            or not set(text[:separator]) <= _KEY_ID_CHARS_ANY_CASE):
        raise FormError(f"{_quoted(text)} is not an opaque ID (KEYID_ and 13 base32 chars, e.g. "
                        "k1_2TJVZN1P765Y3)")
    return text[:separator]


def parse_opaque(key: OpaqueKey, text: str) -> int:
    """Decrypts an opaque text with `key`; FormError when it names another key id (ignoring
    case) or its base32 part is malformed."""
    key_id = opaque_key_id(text)
    if not key.has_id(key_id):
        raise FormError(f"{_quoted(text)} was made with key '{key_id}', not '{key.id}'")
    try:
        value = parse_base32(text[len(key_id) + 1:])
    except FormError as error:
        raise FormError(f"opaque ID {error}") from None
    return key.decrypt(value)


class KeyRing:
    """The keys of an opaque-form key file: every key decodes (an opaque text names its key
    id), only `current` encodes. The file is TOML, mode 0600 or stricter:

        current = "k2"      # the key that encodes new IDs; may be left out with one key
        [[key]]
        id = "k1"           # 1..8 chars of a-z and 0-9
        secret = "000102030405060708090a0b0c0d0e0f"   # 16 bytes, 32 hex digits
        [[key]]
        id = "k2"
        secret = "..."

    To rotate, add a key and point `current` at it; drop the old key once no stored ID uses
    it. At most KEY_FILE_SIZE_MAX bytes and KEY_COUNT_MAX keys, ids unique."""

    def __init__(self, keys: Iterable[OpaqueKey], current: str | None = None):
        """A ring of `keys`; `current` names the one that encodes (needed with several)."""
        self._keys = list(keys)
        if not self._keys:
            raise FormError("no key; a key ring needs at least one OpaqueKey")
        if len(self._keys) > KEY_COUNT_MAX:
            raise FormError(f"more than {KEY_COUNT_MAX} keys")
        for i, key in enumerate(self._keys):
            if not isinstance(key, OpaqueKey):
                raise FormError(f"key {i + 1} is a {type(key).__name__}, not an OpaqueKey")
            if any(other.has_id(key.id) for other in self._keys[:i]):
                raise FormError(f"key id '{key.id}' appears twice")
        if current is None:
            if len(self._keys) > 1:
                raise FormError(f"{len(self._keys)} keys and no current = \"ID\" saying which "
                                "one encodes new IDs")
            self._current = self._keys[0]
        else:
            chosen = self.find(current)
            if chosen is None:
                raise FormError(f"current = \"{current}\" names no key")
            self._current = chosen

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> KeyRing:
        """The key ring of the key file at `path`. FormError, naming the file, when it cannot
        be read, is not a regular file, lets group or others in (with the chmod that fixes
        it), is too large, is not TOML (with the line), or holds a key without id or secret,
        an id or secret malformed or twice, an unknown setting, no key, several keys and no
        `current`, or a `current` that names no key."""
        path = os.fspath(path)
        try:
            # Non-blocking: opening a FIFO must not hang; the file type is checked next.
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as error:
            raise FormError(f"key file {path}: {error.strerror or error}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise FormError(f"key file {path} is not a regular file")
            if info.st_mode & 0o077:
                raise FormError(f"key file {path} has mode {info.st_mode & 0o7777:04o}: group or "
                                "others may read or write it; a key file must be mode 0600 or "
                                f"stricter (chmod 600 {path})")
            if info.st_size > KEY_FILE_SIZE_MAX:
                raise FormError(f"key file {path} is larger than {KEY_FILE_SIZE_MAX} bytes")
            with os.fdopen(os.dup(fd), "rb") as file:
                raw = file.read(KEY_FILE_SIZE_MAX + 1)
        except OSError as error:
            raise FormError(f"key file {path}: {error.strerror or error}") from None
        finally:
            os.close(fd)
        if len(raw) > KEY_FILE_SIZE_MAX:
            raise FormError(f"key file {path} is larger than {KEY_FILE_SIZE_MAX} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise FormError(f"{path}: not TOML: not UTF-8 text (byte {error.start})") from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, toml_text: str, source: str = "key file") -> KeyRing:
        """The same from TOML text (no file, no mode check); `source` names it in messages."""
        try:
            root = tomllib.loads(toml_text)
        except tomllib.TOMLDecodeError as error:
            message = str(error)
            at = re.search(r"\s*\(at line (\d+), column \d+\)$", message)
            where = f" at line {at.group(1)}" if at else ""
            description = message[:at.start()] if at else message
            raise FormError(f"{source}: not TOML: {description}{where}") from None
        for name in root:
            if name not in ("key", "current"):
                raise FormError(f"{source}: unknown setting '{name}' (current and [[key]])")
        entries, current = root.get("key"), root.get("current")
        if ("key" in root and not isinstance(entries, list)) or \
                ("current" in root and not isinstance(current, str)):
            raise FormError(f"{source}: key must be [[key]] tables and current a string such "
                            "as \"k1\"")
        if not entries:
            raise FormError(f"{source}: no key; add [[key]] with id = \"k1\" and secret = 32 "
                            "hex digits")
        if len(entries) > KEY_COUNT_MAX:
            raise FormError(f"{source}: more than {KEY_COUNT_MAX} keys")
        keys: list[OpaqueKey] = []
        for index, entry in enumerate(entries):
            key = _read_key(entry, source, index)
            if any(other.has_id(key.id) for other in keys):
                raise FormError(f"{source}: key id '{key.id}' appears twice")
            keys.append(key)
        if current is None and len(keys) > 1:
            raise FormError(f"{source}: {len(keys)} keys and no current = \"ID\" saying which "
                            "one encodes new IDs")
        if current is not None and not any(key.has_id(current) for key in keys):
            raise FormError(f"{source}: current = \"{current}\" names no key")
        return cls(keys, current)

    @property
    def current(self) -> OpaqueKey:
        """The key new IDs are encoded with."""
        return self._current

    @property
    def keys(self) -> tuple[OpaqueKey, ...]:
        return tuple(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def find(self, id: str) -> OpaqueKey | None:
        """The key with this id (ignoring case), or None."""
        return next((key for key in self._keys if key.has_id(id)), None)

    def format(self, id_: int) -> str:
        """The opaque form of `id_` with the current key."""
        return self._current.format(id_)

    def decode(self, text: str) -> int:
        """The ID of an opaque text, with the key it names. FormError when it is malformed or
        names a key this ring lacks."""
        key_id = opaque_key_id(text)
        key = self.find(key_id)
        if key is None:
            raise FormError(f"opaque ID '{text}' names key '{key_id}', which the key file lacks")
        return parse_opaque(key, text)


def _read_key(entry: object, source: str, index: int) -> OpaqueKey:
    """One [[key]] table into an OpaqueKey."""
    where = f"{source}: key {index + 1}"
    if not isinstance(entry, dict):
        raise FormError(f"{where} is not a table; write [[key]] with id and secret")
    for name in entry:
        if name not in ("id", "secret"):
            raise FormError(f"{where} has an unknown setting '{name}' (only id and secret)")
    key_id, secret_hex = entry.get("id"), entry.get("secret")
    if not isinstance(key_id, str) or not isinstance(secret_hex, str):
        raise FormError(f"{where} needs both id = \"...\" and secret = \"...\"")
    if len(secret_hex) != 2 * OPAQUE_SECRET_SIZE or not all(c in _HEX_VALUE for c in secret_hex):
        raise FormError(f"{where} ({key_id}): secret must be 32 hex digits (16 bytes)")
    try:
        return OpaqueKey(key_id, bytes.fromhex(secret_hex))
    except FormError as error:
        raise FormError(f"{where}: {error}") from None


# ---- any form ----

@dataclass(frozen=True)
class Parsed:
    """What parse_id and parse_any read: the form, the ID, the tag of a readable text ("" for
    others) and the key id of an opaque one, as written ("" for others)."""

    form: Form
    id: int
    tag: str = ""
    key_id: str = ""


LayoutLike = Layout | ReadableForm
KeysLike = KeyRing | OpaqueKey


def _readable_of(layout: LayoutLike | None, form: Form) -> ReadableForm:
    if layout is None:
        raise FormError(f"the {form.value} form needs the ID layout (Client.layout(), or a "
                        "Layout)")
    return layout if isinstance(layout, ReadableForm) else ReadableForm(layout)


def _ring_of(keys: KeysLike | None) -> KeyRing:
    if keys is None:
        raise FormError("the opaque form needs a key file (KeyRing.load)")
    return keys if isinstance(keys, KeyRing) else KeyRing([keys])


def format_id(form: Form | str, id_: int, *, layout: LayoutLike | None = None, tag: str = "",
              keys: KeysLike | None = None) -> str:
    """`id_` in `form`. readable and uuid need `layout` (a Layout or a ReadableForm); opaque
    needs `keys` (its current key encodes); a tag is for the readable form only."""
    form = parse_form(form)
    if form is Form.READABLE:
        return _readable_of(layout, form).format(id_, tag)
    if tag:
        raise FormError("a tag is part of the readable form only")
    if form is Form.UUID:
        return format_uuid(_readable_of(layout, form).layout, id_)
    if form is Form.OPAQUE:
        return _ring_of(keys).format(id_)
    return {Form.DEC: format_dec, Form.HEX: format_hex, Form.BASE32: format_base32}[form](id_)


def parse_id(form: Form | str, text: str, *, layout: LayoutLike | None = None,
             keys: KeysLike | None = None) -> Parsed:
    """Text in `form`, read back; needs what format_id needs."""
    form = parse_form(form)
    if form is Form.READABLE:
        readable = _readable_of(layout, form).parse(text)
        return Parsed(form, readable.id, tag=readable.tag)
    if form is Form.UUID:
        return Parsed(form, parse_uuid(_readable_of(layout, form).layout, text))
    if form is Form.OPAQUE:
        id_ = _ring_of(keys).decode(text)
        return Parsed(form, id_, key_id=opaque_key_id(text))
    parse = {Form.DEC: parse_dec, Form.HEX: parse_hex, Form.BASE32: parse_base32}[form]
    return Parsed(form, parse(text))


def parse_any(text: str, *, layout: LayoutLike | None = None,
              keys: KeysLike | None = None) -> Parsed:
    """Text in whichever form reads it: hex, dec, base32, and with `layout` readable and uuid,
    with `keys` opaque. FormError when none does (with the likeliest form's reason) or when two
    do (13 digits are both dec and base32): then say which form with parse_id."""
    text = _text(text)
    readable = None if layout is None else _readable_of(layout, Form.READABLE)
    likeliest = Form.DEC
    if len(text) > 2 and text[0] == "0" and text[1] in "xX":
        likeliest = Form.HEX
    try:
        opaque_key_id(text)
        likeliest = Form.OPAQUE
    except FormError:
        pass
    if len(text) == BASE32_SIZE:
        likeliest = Form.BASE32
    if readable is not None and len(text) > DEC_SIZE_MAX:
        likeliest = Form.READABLE
    if readable is not None and len(text) == UUID_SIZE and "-" in text:
        likeliest = Form.UUID
    found: Parsed | None = None
    for form in (Form.HEX, Form.DEC, Form.BASE32, Form.READABLE, Form.OPAQUE, Form.UUID):
        if (form in (Form.READABLE, Form.UUID) and readable is None) or \
                (form is Form.OPAQUE and keys is None):
            continue
        try:
            parsed = parse_id(form, text, layout=readable, keys=keys)
        except FormError:
            continue
        if found is not None:
            raise FormError(f"'{text}' reads as {found.form.value} ({found.id}) and as "
                            f"{form.value} ({parsed.id}); say which form it is")
        found = parsed
    if found is not None:
        return found
    parse_id(likeliest, text, layout=readable, keys=keys)  # raises: no form read it
    raise AssertionError("a form that reads the text was found above")
