"""Suite unit: every test vector of proto/PROTOCOL.md against the Python encoder, decoder,
layout and signing (auth.py), byte for byte, and SipHash-2-4 against its published reference
table. The path comes from FLURRY_PROTOCOL_MD (set by meson). No vector is
skipped silently: each kind is counted and the totals are checked at the end."""

from __future__ import annotations

import collections
import os

import pytest

from flurry_client import Counters, Key, Options
from flurry_client.auth import (ANSWER_MAC_SIZE, request_mac, sign_request, siphash24,
                                verify_answer)
from flurry_client.exchange import Exchange
from flurry_client.layout import CORE_FROM_NODE, CORE_FROM_SEQUENCE, Layout
from flurry_client.wire import (DROPPED, Info, Request, RequestError, Response, ResponseError,
                                Status, decode_request, decode_response, encode_request,
                                encode_response, read_request_fields, read_response_fields)

from vectors import load, number, parse_fields

PROTOCOL_MD = os.environ.get("FLURRY_PROTOCOL_MD", "")
VECTORS = load(PROTOCOL_MD) if os.path.isfile(PROTOCOL_MD) else {}
CHECKED: collections.Counter[str] = collections.Counter()


def names(kind: str) -> list[str]:
    return [name for name, v in VECTORS.items() if v["kind"] == kind]


def check_size_and_fields(v: dict, read) -> None:
    assert len(v["bytes"]) == number(v["size"]), "size: disagrees with hex:"
    if "fields" in v:
        expected = {k: number(x) for k, x in parse_fields(v["fields"]).items()}
        assert read(v["bytes"]) == expected
    else:
        assert len(v["bytes"]) < 20, "a datagram of 20 bytes or more has a fields: line"


def test_protocol_md_found():
    assert os.path.isfile(PROTOCOL_MD), (
        f"FLURRY_PROTOCOL_MD={PROTOCOL_MD!r} is not a file; meson passes proto/PROTOCOL.md")
    assert len(VECTORS) > 0


@pytest.mark.parametrize("name", names("request"))
def test_request_vector(name):
    v = VECTORS[name]
    check_size_and_fields(v, read_request_fields)
    error = decode_request(v["bytes"])
    assert error.name.lower() == v["decode"]
    assert v["handling"] == ("dropped" if error in DROPPED else "answered")
    assert (v["answer"] == "none") == (error in DROPPED)
    if "fields" in v:
        f = {k: number(x) for k, x in parse_fields(v["fields"]).items()}
        request = Request(f["opcode"], f["count"], f["request_id"], f["flags"],
                          v.get("name", "").encode("ascii"))
    if v["answer"] != "none":
        # The client takes the reference server's answer for the answer to this request
        # (rules 1-15 of "Response decoding").
        assert VECTORS[v.get("server", "reference_server")]["kind"] == "server"
        exchange = Exchange(Options())
        assert exchange.accept(VECTORS[v["answer"]]["bytes"], request) is not None
        assert exchange.counters == Counters()
    if v["encode"] == "yes":
        assert encode_request(request, number(v["size"])) == v["bytes"]
        CHECKED["request encoded"] += 1
    else:
        assert v["encode"] == "no"
        CHECKED["request not encodable"] += 1


@pytest.mark.parametrize("name", names("response"))
def test_response_vector(name):
    v = VECTORS[name]
    check_size_and_fields(v, read_response_fields)
    error, response = decode_response(v["bytes"])
    assert error.name.lower() == v["decode"]
    if error != ResponseError.OK:
        assert response is None
        CHECKED["response rejected"] += 1
        return
    fields = parse_fields(v["fields"])
    assert {k: getattr(response, k) for k in fields} == {k: number(x) for k, x in fields.items()}
    ranges = [parse_fields(line) for line in v["range"]]
    assert response.ranges == [(number(r["first"]), number(r["count"])) for r in ranges]
    if "info" in v:
        assert response.info == Info(**{k: number(x) for k, x in parse_fields(v["info"]).items()})
    else:
        assert response.info is None
    # Decodes ok, so it is also encoded and must give exactly these bytes.
    rebuilt = Response(**{k: number(x) for k, x in fields.items()}, ranges=response.ranges,
                       info=response.info)
    assert encode_response(rebuilt) == v["bytes"]
    CHECKED["response decoded"] += 1


def layout_of(text: str) -> Layout:
    f = parse_fields(text)
    core_from = {"sequence": CORE_FROM_SEQUENCE, "node": CORE_FROM_NODE}[f.pop("core_from")]
    return Layout(core_from=core_from, **{k: number(x) for k, x in f.items()})


@pytest.mark.parametrize("name", names("id"))
def test_id_vector(name):
    v = VECTORS[name]
    layout = layout_of(v["layout"])
    assert layout.validate() is None
    id_ = number(v["id"])
    assert id_ == number(v["id_hex"])
    fields = {k: number(x) for k, x in parse_fields(v["fields"]).items()}
    decoded = layout.decode(id_)
    assert vars(decoded) == fields
    assert decoded.utc() == v["utc"]
    assert layout.compose(fields["time"], fields["node"], fields["core"], fields["counter"]) == id_
    CHECKED["id"] += 1


# The SipHash reference implementation's vectors.h (vectors_sip64; also the paper's appendix):
# SipHash-2-4 with key 00 01 .. 0f of the message 00 01 .. (n-1), for n = 0..63, in the
# byte order it writes them.
SIPHASH_REFERENCE = """
310e0edd47db6f72 fd67dc93c539f874 5a4fa9d909806c0d 2d7efbd796666785 b7877127e09427cf
8da699cd64557618 cee3fe586e46c9cb 37d1018bf50002ab 6224939a79f5f593 b0e4a90bdf82009e
f3b9dd94c5bb5d7a a7ad6b22462fb3f4 fbe50e86bc8f1e75 903d84c02756ea14 eef27a8e90ca23f7
e545be4961ca29a1 db9bc2577fcc2a3f 9447be2cf5e99a69 9cd38d96f0b3c14b bd6179a71dc96dbb
98eea21af25cd6be c7673b2eb0cbf2d0 883ea3e395675393 c8ce5ccd8c030ca8 94af49f6c650adb8
eab8858ade92e1bc f315bb5bb835d817 adcf6b0763612e2f a5c91da7acaa4dde 716595876650a2a6
28ef495c53a387ad 42c341d8fa92d832 ce7cf2722f512771 e37859f94623f3a7 381205bb1ab0e012
ae97a10fd434e015 b4a31508beff4d31 81396229f0907902 4d0cf49ee5d4dcca 5c73336a76d8bf9a
d0a704536ba93e0e 925958fcd6420cad a915c29bc8067318 952b79f3bc0aa6d4 f21df2e41d4535f9
87577519048f53a9 10a56cf5dfcd9adb eb75095ccd986cd0 51a9cb9ecba312e6 96afadfc2ce666c7
72fe52975a4364ee 5a1645b276d592a1 b274cb8ebf87870a 6f9bb4203de7b381 eaecb2a30b22a87f
9924a43cc1315724 bd838d3aafbf8db7 0b1a2a3265d51aea 135079a3231ce660 932b2846e4d70666
e1915f5cb1eca46c f325965ca16d629f 575ff28e60381be5 724506eb4c328a95
""".split()


@pytest.mark.parametrize("n", range(len(SIPHASH_REFERENCE)))
def test_siphash24_reference_table(n):
    assert len(SIPHASH_REFERENCE) == 64
    assert siphash24(bytes(range(16)), bytes(range(n))).hex() == SIPHASH_REFERENCE[n]


def key_of(v: dict) -> Key:
    f = parse_fields(v["key"])
    return Key(number(f["id"]), bytes.fromhex(f["secret"]))


def mac_bytes(text: str) -> bytes:
    """A MAC as PROTOCOL.md prints it: its 8 bytes read as one big-endian number."""
    return number(text).to_bytes(8, "big")


def check_answer_signature(answer: bytes, mac_of_request: bytes, key: Key) -> None:
    """The answer verifies for this request MAC, and no longer with any one bit flipped (in
    the answer, or in the request MAC it is bound to), nor truncated by a byte."""
    assert verify_answer(answer, mac_of_request, key)
    for i in range(len(answer)):
        flipped = bytearray(answer)
        flipped[i] ^= 0x01
        assert not verify_answer(bytes(flipped), mac_of_request, key), f"byte {i} flipped"
    other = bytes([mac_of_request[0] ^ 0x80]) + mac_of_request[1:]
    assert not verify_answer(answer, other, key), "the answer of another request"
    assert not verify_answer(answer[:-1], mac_of_request, key)


def signed_request_of(name: str) -> dict:
    """The signed request vector whose answer is the answer vector `name`."""
    found = [v for v in VECTORS.values() if v["kind"] == "signed" and v.get("answer") == name]
    assert len(found) == 1, f"no single signed request answered by {name}"
    return found[0]


@pytest.mark.parametrize("name", names("signed"))
def test_signed_vector(name):
    v = VECTORS[name]
    if "trailer" not in v:  # an answer: checked with the key of the request it answers
        key = key_of(signed_request_of(name))
        check_size_and_fields(v, lambda data: read_response_fields(data[:-ANSWER_MAC_SIZE]))
        mac_of_request = mac_bytes(v["request_mac"])
        assert v["bytes"][-ANSWER_MAC_SIZE:] == mac_bytes(v["answer_mac"])
        check_answer_signature(v["bytes"], mac_of_request, key)
        assert decode_response(v["bytes"][:-ANSWER_MAC_SIZE])[0] == ResponseError.OK
        CHECKED["signed answer"] += 1
        return
    check_size_and_fields(v, read_request_fields)
    key = key_of(v)
    trailer = {k: number(x) for k, x in parse_fields(v["trailer"]).items()}
    assert set(trailer) == {"key_id", "server", "timestamp_us", "mac"}
    assert trailer["key_id"] == key.id
    f = {k: number(x) for k, x in parse_fields(v["fields"]).items()}
    request = Request(f["opcode"], f["count"], f["request_id"])  # flags: sign_request sets it
    signed = sign_request(request, number(v["size"]), key, trailer["server"],
                          trailer["timestamp_us"])
    assert signed == v["bytes"]
    assert request_mac(signed) == mac_bytes(str(trailer["mac"]))
    # A signed client accepts the reference server's answer to it, and only that.
    answer = VECTORS[v["answer"]]
    assert mac_bytes(answer["request_mac"]) == request_mac(signed)
    # The answer is what the server's clock and the request's server field call for: stale
    # beyond the default 5 s window, wrong_server for a GET_IDS signed for any server.
    answer_fields = {k: number(x) for k, x in parse_fields(answer["fields"]).items()}
    skew_ms = abs(trailer["timestamp_us"] // 1000 - number(v["server_clock_ms"]))
    wrong_server = request.opcode == 1 and trailer["server"] != answer_fields["node"]
    expected = (RequestError.STALE_TIMESTAMP if skew_ms > 5000 else
                RequestError.WRONG_SERVER if wrong_server else None)
    if expected is None:
        assert answer_fields["status"] == Status.OK
    else:
        assert (answer_fields["status"], answer_fields["detail"]) == (Status.UNAUTHORIZED,
                                                                       expected)
    exchange = Exchange(Options(key=key))
    assert exchange.accept(answer["bytes"], request, request_mac(signed)) is not None
    assert exchange.counters == Counters()
    assert exchange.accept(answer["bytes"][:-ANSWER_MAC_SIZE], request, request_mac(signed)) is None
    assert exchange.counters == Counters(unverified_responses=1)
    CHECKED["signed request"] += 1


@pytest.mark.parametrize("name", names("server"))
def test_server_vector(name):
    """Servers describe the reference handler; a client has none, but their fields parse."""
    f = parse_fields(VECTORS[name]["fields"])
    assert f["layout"] == "snowflake"
    CHECKED["server"] += 1


def test_zz_every_vector_ran():
    """Runs last (pytest keeps file order): every vector was checked, none skipped."""
    kinds = collections.Counter(v["kind"] for v in VECTORS.values())
    print(f"vectors: {dict(CHECKED)} of {dict(kinds)}")
    assert sum(kinds.values()) == len(VECTORS) > 0
    assert CHECKED["request encoded"] > 0 and CHECKED["response decoded"] > 0
    assert CHECKED["response rejected"] > 0 and CHECKED["id"] > 0
    assert CHECKED["request encoded"] + CHECKED["request not encodable"] == kinds["request"]
    assert CHECKED["response decoded"] + CHECKED["response rejected"] == kinds["response"]
    assert CHECKED["id"] == kinds["id"] and CHECKED["server"] == kinds["server"]
    assert CHECKED["signed request"] > 0 and CHECKED["signed answer"] > 0
    assert CHECKED["signed request"] + CHECKED["signed answer"] == kinds["signed"]
    assert set(kinds) == {"request", "response", "id", "server", "signed"}, "a kind unchecked"
    # PROTOCOL.md states its own total at the end of the section.
    with open(PROTOCOL_MD, encoding="utf-8") as file:
        assert f"<!-- {len(VECTORS)} vectors -->" in file.read()
