"""Suite unit: every test vector of proto/PROTOCOL.md against the Python encoder, decoder and
layout, byte for byte. The path comes from FLURRY_PROTOCOL_MD (set by meson). No vector is
skipped silently: each kind is counted and the totals are checked at the end."""

from __future__ import annotations

import collections
import os

import pytest

from flurry_client import Counters, Options
from flurry_client.exchange import Exchange
from flurry_client.layout import CORE_FROM_NODE, CORE_FROM_SEQUENCE, Layout
from flurry_client.wire import (DROPPED, Info, Request, Response, ResponseError, decode_request,
                                decode_response, encode_request, encode_response,
                                read_request_fields, read_response_fields)

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
    # PROTOCOL.md states its own total at the end of the section.
    with open(PROTOCOL_MD, encoding="utf-8") as file:
        assert f"<!-- {len(VECTORS)} vectors -->" in file.read()
