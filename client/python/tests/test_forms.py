"""Suite unit: the ID forms (flurry_client.forms) against client/forms-vectors.json, which the
C++ implementation made (path from FLURRY_FORMS_VECTORS, set by meson; by default
../forms-vectors.json next to this client's directory): every ID formats to every text byte for
byte, every text parses back (readable: with its tag), every `also_reads` text parses to its
ID, every `refused` text fails; the uuid form as Python's uuid module reads it; the opaque
form's known answers and inverse; the key file's rules. Each vector kind is counted and the
totals checked at the end, so nothing is skipped silently."""

from __future__ import annotations

import collections
import json
import os
import random
import uuid

import pytest

from flurry_client import InvalidArgumentError, Layout, forms
from flurry_client.forms import (Form, FormError, KeyRing, OpaqueKey, ReadableForm, format_id,
                                 parse_any, parse_id)

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS_PATH = os.environ.get("FLURRY_FORMS_VECTORS") or os.path.join(
    HERE, "..", "..", "forms-vectors.json")
with open(VECTORS_PATH, encoding="utf-8") as _file:
    VECTORS = json.load(_file)
CHECKED: collections.Counter[str] = collections.Counter()
SECRET = bytes.fromhex(VECTORS["key"]["secret"])
RING = KeyRing([OpaqueKey(VECTORS["key"]["id"], SECRET)])
TAG = VECTORS["tag"]


def layout_of(entry: dict) -> Layout:
    fields = entry["layout"]
    return Layout(time_bits=fields["time_bits"], node_bits=fields["node_bits"],
                  sequence_bits=fields["sequence_bits"], time_unit_ms=fields["time_unit_ms"],
                  epoch_ms=int(fields["epoch_ms"]))


LAYOUTS = {entry["name"]: entry for entry in VECTORS["layouts"]}


def test_vectors_found():
    assert os.path.isfile(VECTORS_PATH)
    assert len(LAYOUTS) >= 5 and all(entry["ids"] for entry in LAYOUTS.values())


@pytest.mark.parametrize("name", LAYOUTS)
def test_every_id_formats_to_every_text_and_back(name):
    entry = LAYOUTS[name]
    layout = layout_of(entry)
    readable = ReadableForm(layout)
    for vector in entry["ids"]:
        id_ = int(vector["id"])
        expected = {
            "dec": forms.format_dec(id_), "hex": forms.format_hex(id_),
            "base32": forms.format_base32(id_), "readable": readable.format(id_),
            "readable_tagged": readable.format(id_, TAG), "opaque": RING.format(id_),
            "uuid": forms.format_uuid(layout, id_),
        }
        assert set(vector) - {"id"} == set(expected), "a form the vectors have and this lacks"
        for form, text in expected.items():
            assert text == vector[form], f"{form} of {id_}"
        # The same through format_id with what each form needs.
        for form in Form:
            assert format_id(form, id_, layout=layout, keys=RING) == vector[form.value]
        assert format_id("readable", id_, layout=readable, tag=TAG) == vector["readable_tagged"]
        # Every text parses back: with its form, and as the only form that reads it.
        assert forms.parse_dec(vector["dec"]) == id_
        assert forms.parse_hex(vector["hex"]) == id_
        assert forms.parse_base32(vector["base32"]) == id_
        assert readable.parse(vector["readable"]) == forms.Readable(id_, "")
        assert readable.parse(vector["readable_tagged"]) == forms.Readable(id_, TAG)
        assert RING.decode(vector["opaque"]) == id_
        assert forms.parse_uuid(layout, vector["uuid"]) == id_
        for form in Form:
            parsed = parse_id(form, vector[form.value], layout=layout, keys=RING)
            assert (parsed.form, parsed.id) == (form, id_)
        tagged = parse_id("readable", vector["readable_tagged"], layout=readable)
        assert (tagged.id, tagged.tag) == (id_, TAG)
        assert parse_id("opaque", vector["opaque"], keys=RING).key_id == RING.current.id
        # (Not dec, base32 or an untagged readable text: they may be all digits, which two
        # forms read; parse_any refuses that, tested below.)
        for form in ("hex", "readable_tagged", "opaque", "uuid"):
            found = parse_any(vector[form], layout=layout, keys=RING)
            assert found.id == id_, f"parse_any of {form}"
            assert found.form.value == form.removesuffix("_tagged")
        CHECKED["id"] += 1


@pytest.mark.parametrize("name", LAYOUTS)
def test_uuid_is_version_7_variant_rfc_9562_for_pythons_uuid(name):
    entry = LAYOUTS[name]
    layout = layout_of(entry)
    for vector in entry["ids"]:
        read = uuid.UUID(vector["uuid"])
        assert read.version == 7 and read.variant == uuid.RFC_4122  # RFC 9562's variant
        assert str(read) == vector["uuid"]
        # unix_ts_ms is the ID's instant: UUIDs sort by time.
        assert read.int >> 80 == layout.decode(int(vector["id"])).unix_ms
        assert forms.parse_uuid(layout, vector["uuid"].upper()) == int(vector["id"])
        CHECKED["uuid"] += 1


@pytest.mark.parametrize("name", LAYOUTS)
def test_refused_texts_of_a_layout_fail(name):
    entry = LAYOUTS[name]
    layout = layout_of(entry)
    assert set(entry["refused"]) == {"readable", "uuid"}
    for form, texts in entry["refused"].items():
        for text in texts:
            with pytest.raises(FormError):
                parse_id(form, text, layout=layout)
            CHECKED["refused"] += 1


@pytest.mark.parametrize("index", range(len(VECTORS["also_reads"])))
def test_also_reads(index):
    vector = VECTORS["also_reads"][index]
    assert parse_id(vector["form"], vector["text"], keys=RING).id == int(vector["id"])
    CHECKED["also_reads"] += 1


@pytest.mark.parametrize("form", VECTORS["refused"])
def test_refused_texts_fail(form):
    for text in VECTORS["refused"][form]:
        with pytest.raises(FormError):
            parse_id(form, text, keys=RING)
        CHECKED["refused"] += 1


def test_zz_every_vector_ran():
    """Runs last (pytest keeps file order): every vector was checked, none skipped."""
    ids = sum(len(entry["ids"]) for entry in VECTORS["layouts"])
    refused = (sum(len(texts) for texts in VECTORS["refused"].values())
               + sum(len(texts) for entry in VECTORS["layouts"]
                     for texts in entry["refused"].values()))
    print(f"checked {dict(CHECKED)}")
    assert CHECKED == {"id": ids, "uuid": ids, "refused": refused,
                       "also_reads": len(VECTORS["also_reads"])}
    assert ids > 0 and refused > 0


# ---- beyond the vectors ----

def test_known_answers_and_the_inverse():
    key = RING.current
    assert key.encrypt(0) == forms.OPAQUE_KNOWN_ANSWER_OF_0
    assert key.encrypt(1) == forms.OPAQUE_KNOWN_ANSWER_OF_1
    assert key.encrypt(4194324487) == forms.OPAQUE_KNOWN_ANSWER_OF_KNOWN_ID
    assert key.format(4194324487) == forms.OPAQUE_KNOWN_TEXT_OF_KNOWN_ID
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(200):
        x = rng.randrange(forms.ID_MAX + 1)
        assert 0 <= key.encrypt(x) <= forms.ID_MAX and key.decrypt(key.encrypt(x)) == x
    assert repr(key) == "OpaqueKey(id='k1', secret=<16 bytes>)", "no secret shown"


def test_round_trips_of_random_ids_in_every_form():
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"seed {seed}")
    rng = random.Random(seed)
    layout = Layout()  # snowflake, default epoch
    readable = ReadableForm(layout)
    for _ in range(300):
        id_ = rng.randrange(1 << layout.id_bits)
        tag = "".join(rng.choice("ABCXYZ019") for _ in range(rng.randrange(5)))
        for form in Form:
            text = format_id(form, id_, layout=readable, keys=RING,
                             tag=tag if form is Form.READABLE else "")
            parsed = parse_id(form, text, layout=readable, keys=RING)
            assert parsed.id == id_ and parsed.tag == (tag if form is Form.READABLE else "")


def test_fixed_width_forms_sort_like_the_ids():
    layout = Layout()
    readable = ReadableForm(layout)
    ids = sorted(random.Random(7).randrange(1 << 63) for _ in range(200))
    for format_one in (forms.format_hex, forms.format_base32,
                       lambda id_: readable.format(id_ >> 1, "ORD"),
                       lambda id_: forms.format_uuid(layout, id_ >> 1)):
        texts = [format_one(id_) for id_ in ids]
        assert texts == sorted(texts)


@pytest.mark.parametrize("call, message", [
    (lambda: forms.format_dec(-1), "negative"),
    (lambda: forms.format_hex(1 << 63), r"2\^63 or more"),
    (lambda: forms.format_base32(True), "must be an int"),
    (lambda: forms.parse_dec("\u0661"), "not a decimal ID"),  # an Arabic-Indic digit one
    (lambda: forms.parse_dec("1_0"), "not a decimal ID"),
    (lambda: forms.parse_hex("0x1_0"), "not a hexadecimal ID"),
    (lambda: forms.parse_base32("0000000000\u00df00"), "is not a Crockford symbol"),
    (lambda: ReadableForm(Layout()).format(1, "ord"), "may hold only A-Z and 0-9"),
    (lambda: ReadableForm(Layout(time_unit_ms=7)), "time unit 7 ms"),
    (lambda: ReadableForm(Layout(37, 5, 11, time_unit_ms=10)).format(1 << 53, ""),
     "has bits above the layout's 53 bits"),
    (lambda: format_id("base32", 1, tag="ORD"), "readable form only"),
    (lambda: format_id("readable", 1), "needs the ID layout"),
    (lambda: format_id("opaque", 1), "needs a key file"),
    (lambda: format_id("octal", 1), "unknown form 'octal'"),
    (lambda: parse_any("1234567890123"), "reads as dec .* and as base32 .*; say which form"),
    (lambda: parse_any("k1_2TJVZN1P765Y3"), "needs a key file"),
    (lambda: OpaqueKey("K1", SECRET), "must be 1 to 8 chars of a-z and 0-9"),
    (lambda: OpaqueKey("k1", bytes(16)), "all zero"),
    (lambda: KeyRing([RING.current, OpaqueKey("k2", SECRET)]), "no current"),
    (lambda: RING.decode("k9_2TJVZN1P765Y3"), "names key 'k9', which the key file lacks"),
])
def test_refusals_name_the_problem(call, message):
    with pytest.raises(FormError, match=message) as raised:
        call()
    assert isinstance(raised.value, InvalidArgumentError) and isinstance(raised.value, ValueError)


def test_readable_of_a_layout_of_millions_of_years():
    """Full years beyond datetime's 9999: 50 time bits of 1 s units, 8-digit years."""
    layout = Layout(time_bits=50, node_bits=0, sequence_bits=13, time_unit_ms=1000)
    readable = ReadableForm(layout)
    last = (1 << layout.id_bits) - 1
    text = readable.format(last)
    # 2^50 s after 2024-01-01 lie in the year 35,680,371.
    assert text.startswith("3568037109") and readable.time_digits == 18
    assert readable.parse(text).id == last
    with pytest.raises(FormError, match="past what a UUID's 48 bits"):
        forms.format_uuid(layout, last)


# ---- the key file ----

KEY_FILE = """current = "k2"
[[key]]
id = "k1"
secret = "000102030405060708090a0b0c0d0e0f"
[[key]]
id = "k2"
secret = "8F3C1D6E2A9B4C7D0E1F2A3B4C5D6E7F"
"""


def write_key_file(tmp_path, text: str, mode: int = 0o600) -> str:
    path = tmp_path / "keys.toml"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def test_key_file_current_encodes_and_every_key_decodes(tmp_path):
    ring = KeyRing.load(write_key_file(tmp_path, KEY_FILE, 0o400))
    assert len(ring) == 2 and ring.current.id == "k2"
    text = ring.format(4194324487)
    assert text.startswith("k2_") and ring.decode(text) == 4194324487
    assert ring.decode("k1_2TJVZN1P765Y3") == 4194324487  # written with the old key
    assert ring.decode("K1_2tjvzn1p765y3") == 4194324487
    assert parse_any(text, keys=ring).key_id == "k2"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602])
def test_key_file_group_or_others_refused(tmp_path, mode):
    path = write_key_file(tmp_path, KEY_FILE, mode)
    with pytest.raises(FormError) as raised:
        KeyRing.load(path)
    assert str(raised.value) == (
        f"key file {path} has mode {mode:04o}: group or others may read or write it; a key "
        f"file must be mode 0600 or stricter (chmod 600 {path})")


@pytest.mark.parametrize("text, message", [
    ('[[key]]\nid = "k1"\n', r"key 1 needs both id = \"...\" and secret"),
    ('[[key]]\nid = "k1"\nsecret = "0001"\n', r"key 1 \(k1\): secret must be 32 hex digits"),
    ('[[key]]\nid = "K_1"\nsecret = "000102030405060708090a0b0c0d0e0f"\n',
     "key 1: key id 'K_1' must be 1 to 8 chars"),
    ('[[key]]\nid = "k1"\nsecret = "000102030405060708090a0b0c0d0e0f"\nsalt = 1\n',
     "key 1 has an unknown setting 'salt'"),
    ('[[key]]\nid = "k1"\nsecret = "000102030405060708090a0b0c0d0e0f"\n'
     '[[key]]\nid = "k1"\nsecret = "000102030405060708090a0b0c0d0e0e"\n',
     "key id 'k1' appears twice"),
    ('current = "k1"\n', "no key; add"),
    ('key = "k1"\n', "key must be \\[\\[key\\]\\] tables"),
    ('colour = "blue"\n', "unknown setting 'colour'"),
    ('current = "k3"\n' + KEY_FILE.split("\n", 1)[1], 'current = "k3" names no key'),
    (KEY_FILE.split("\n", 1)[1], "2 keys and no current"),
    ('[[key]]\nid = "k1"\nsecret = 000102\n', "not TOML: .* at line 3$"),
])
def test_key_file_refusals(tmp_path, text, message):
    path = write_key_file(tmp_path, text)
    with pytest.raises(FormError, match=f"^{path}: {message}"):
        KeyRing.load(path)


def test_key_file_missing_or_not_a_file(tmp_path):
    with pytest.raises(FormError, match="No such file or directory"):
        KeyRing.load(tmp_path / "absent.toml")
    tmp_path.chmod(0o700)
    with pytest.raises(FormError, match="is not a regular file"):
        KeyRing.load(tmp_path)
