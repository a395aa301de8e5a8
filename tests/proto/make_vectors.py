#!/usr/bin/env python3
# tests/proto/make_vectors.py — computes the "Test vectors" section of proto/PROTOCOL.md from
# the prose of that document alone (struct.pack, big-endian), never from the C++ encoder, so
# that tests/proto/wire_test.cc checks the code against the document and not against itself.
#
# Usage: python3 tests/proto/make_vectors.py            print the vector blocks
#        python3 tests/proto/make_vectors.py --write    replace them in proto/PROTOCOL.md
#        python3 tests/proto/make_vectors.py --check    exit 1 if PROTOCOL.md differs
# The vector blocks are everything from the first "```\nvector: " to the end of the file.
import os
import struct
import sys

MAGIC = 0x464C
VERSION = 1
GET_IDS, PING, INFO, GET_SEQ = 1, 2, 3, 4
OK, RETRY, BAD_REQUEST, UNAUTHORIZED, FENCED = 0, 1, 2, 3, 4
UNKNOWN_SEQUENCE, NOT_OWNER, EXHAUSTED = 5, 6, 7
FENCED_LOST, FENCED_DRAINING = 0, 1  # FENCED's detail
RESPONSE_BIT = 0x80

# The reference server that the "answer:" lines assume.
EPOCH_MS = 1_704_067_200_000          # 2024-01-01T00:00:00Z
NODE = 5
NOW_T = 1_735_689_600_000 - EPOCH_MS  # 2025-01-01T00:00:00Z in 1 ms units
CEILING_T = NOW_T + 3000              # lead 3 s
RETRY_HINT_US = 1000


def request(opcode, flags=0, count=0, request_id=0, reserved=0, version=VERSION,
            magic=MAGIC, pad_to=20, name=None):
    b = struct.pack(">HBBHHIQ", magic, version, opcode, flags, reserved, count, request_id)
    if name is not None:  # GET_SEQ body: length byte, name bytes
        b += bytes([len(name)]) + name.encode("ascii")
    return b + bytes(max(0, pad_to - len(b)))


def response(opcode, status, node, request_id, detail=0, ranges=(), info=None,
             range_count=None):
    rc = len(ranges) if range_count is None else range_count
    b = struct.pack(">HBBBBHQI", MAGIC, VERSION, opcode | RESPONSE_BIT, status, rc, node,
                    request_id, detail)
    for first, count in ranges:
        b += struct.pack(">QI", first, count)
    if info is not None:
        b += struct.pack(">QHBBBBBB", *info)
    return b


def hexlines(b):
    if not b:
        return ["hex:"]
    out = []
    for i in range(0, len(b), 16):
        chunk = b[i:i + 16].hex()
        out.append("hex: " + " ".join(chunk[j:j + 4] for j in range(0, len(chunk), 4)))
    return out


def snowflake_id(t, node, core, counter, tb=41, nb=10, sb=12, cb=0, core_from="sequence"):
    if core_from == "sequence":
        node_field, seq = node, (core << (sb - cb)) | counter
    else:
        node_field, seq = (node << cb) | core, counter
    assert t < (1 << tb) and node_field < (1 << nb) and seq < (1 << sb)
    return (t << (nb + sb)) | (node_field << sb) | seq


def issue(now_t, count, ranges_allowed, node=NODE, core=0, cb=0, core_from="sequence"):
    """The generator of docs/architecture.md for a fresh core (last_t 0) of the snowflake layout."""
    capacity = 1 << (12 - cb if core_from == "sequence" else 12)
    out, t, counter, left = [], now_t, 0, count
    while left and len(out) < ranges_allowed:
        if counter == capacity:
            t, counter = t + 1, 0
        if t > CEILING_T:
            break
        n = min(left, capacity - counter)
        out.append((snowflake_id(t, node, core, counter, cb=cb, core_from=core_from), n))
        counter += n
        left -= n
    return out


def ranges_max(request_size):
    room = min(3 * request_size, 1472)
    return 0 if room <= 20 else min(255, (room - 20) // 12)


def request_size_for_ids(n, per_range):
    """PROTOCOL.md "How a client asks for N IDs": r = ceil(N / c) + 1 ranges, at most 121."""
    r = min(121, -(-n // per_range) + 1)
    return max(20, -(-(20 + 12 * r) // 3))


blocks = []


def block(lines):
    blocks.append("```\n" + "\n".join(lines) + "\n```")


def req_vector(name, data, fields, decode, handling, encode, answer, burst=None, note=None,
               server=None, seq_name=None):
    """`fields` must be what the first 20 bytes say (None below 20 bytes: no fields line)."""
    lines = [f"vector: {name}", "kind: request"]
    if note:
        lines.append(f"note: {note}")
    if seq_name is not None:
        assert data[20] == len(seq_name) and data[21:21 + len(seq_name)] == seq_name.encode()
        lines.append(f"name: {seq_name}")
    lines += hexlines(data)
    lines.append(f"size: {len(data)}")
    if len(data) >= 20:
        _, _, opcode, flags, _, count, rid = struct.unpack(">HBBHHIQ", data[:20])
        from_bytes = req_fields(opcode, flags, count, rid)
        assert fields == from_bytes, f"{name}: fields '{fields}' but the bytes say '{from_bytes}'"
        lines.append("fields: " + fields)
    else:
        assert fields is None, f"{name}: a {len(data)}-byte request has no header to describe"
    lines += [f"decode: {decode}", f"handling: {handling}", f"encode: {encode}",
              f"answer: {answer}"]
    if burst:
        lines.append("burst: " + burst)
    if server:
        lines.append("server: " + server)
    block(lines)


def resp_vector(name, data, fields, decode, ranges=(), info=None, note=None):
    """`fields` must be what the first 20 bytes say (None below 20 bytes: no fields line)."""
    lines = [f"vector: {name}", "kind: response"]
    if note:
        lines.append(f"note: {note}")
    lines += hexlines(data)
    lines.append(f"size: {len(data)}")
    if len(data) >= 20:
        _, _, opcode, status, rc, node, rid, detail = struct.unpack(">HBBBBHQI", data[:20])
        from_bytes = hdr_fields(opcode & ~RESPONSE_BIT, status, rc, node, rid, detail)
        assert fields == from_bytes, f"{name}: fields '{fields}' but the bytes say '{from_bytes}'"
        lines.append("fields: " + fields)
    else:
        assert fields is None, f"{name}: a {len(data)}-byte response has no header to describe"
    for first, count in ranges:
        lines.append(f"range: first=0x{first:016x} count={count}")
    if info is not None:
        lines.append("info: epoch_ms={} time_unit_ms={} time_bits={} node_bits={} "
                     "sequence_bits={} core_bits={} core_from={} workers={}".format(*info))
    lines.append(f"decode: {decode}")
    block(lines)


def hdr_fields(opcode, status, rc, node, rid, detail):
    return (f"opcode={opcode} status={status} range_count={rc} node={node} "
            f"request_id=0x{rid:016x} detail={detail}")


def req_fields(opcode, flags, count, rid):
    return f"opcode={opcode} flags=0x{flags:04x} count={count} request_id=0x{rid:016x}"


block([
    "vector: reference_server",
    "kind: server",
    f"fields: layout=snowflake node={NODE} core=0 workers=1 retry_hint_us={RETRY_HINT_US} "
    f"now_t={NOW_T} ceiling_t={CEILING_T}",
])

# ---- requests that are served, and their answers ----
def served(name, opcode, count, rid, pad_to=20, note=None, burst=None, answer_kind="ids"):
    data = request(opcode, 0, count, rid, pad_to=pad_to)
    answer = name + "_answer"
    req_vector(name, data, req_fields(opcode, 0, count, rid), "ok", "answered", "yes",
               answer, burst=burst, note=note)
    return data


# GET_IDS, 5 IDs.
rid = 0x0102030405060708
served("get_ids_basic", GET_IDS, 5, rid)
rs = issue(NOW_T, 5, ranges_max(20))
resp_vector("get_ids_basic_answer", response(GET_IDS, OK, NODE, rid, ranges=rs),
            hdr_fields(GET_IDS, OK, len(rs), NODE, rid, 0), "ok", rs,
            note="OK, one range of 5 IDs starting at time now_t, node 5, counter 0")

rid = 0x1111111111111111
served("get_ids_three_ranges", GET_IDS, 10000, rid,
       note="10000 IDs do not fit one 1 ms unit (4096 per unit): the core borrows two more")
rs = issue(NOW_T, 10000, ranges_max(20))
resp_vector("get_ids_three_ranges_answer", response(GET_IDS, OK, NODE, rid, ranges=rs),
            hdr_fields(GET_IDS, OK, len(rs), NODE, rid, 0), "ok", rs,
            note="OK, 3 ranges: 4096 + 4096 + 1808 = 10000")

rid = 0x2222222222222222
served("get_ids_partial", GET_IDS, 20000, rid,
       note="a bare 20-byte request buys 3 ranges: 12288 of the 20000 IDs; ask again")
rs = issue(NOW_T, 20000, ranges_max(20))
resp_vector("get_ids_partial_answer", response(GET_IDS, OK, NODE, rid, ranges=rs),
            hdr_fields(GET_IDS, OK, len(rs), NODE, rid, 0), "ok", rs,
            note="OK with fewer IDs than asked (3 x 4096 = 12288)")

rid = 0x3333333333333333
PADDED = request_size_for_ids(20000, 4096)
assert PADDED == 31 and ranges_max(PADDED) == 6
padded = served("get_ids_padded", GET_IDS, 20000, rid, pad_to=PADDED,
                note="20000 IDs at 4096 per range: ceil(20000 / 4096) + 1 = 6 ranges, "
                     "so 11 zero bytes pad it to 31: the answer may be 93 bytes")
rs = issue(NOW_T, 20000, ranges_max(PADDED))
assert len(rs) == 5 and sum(c for _, c in rs) == 20000
resp_vector("get_ids_padded_answer", response(GET_IDS, OK, NODE, rid, ranges=rs),
            hdr_fields(GET_IDS, OK, len(rs), NODE, rid, 0), "ok", rs,
            note="OK, 5 ranges: 4 x 4096 + 3616 = 20000 in 80 bytes (<= 3 x 31); this core "
                 "started the unit at counter 0, so the sixth range was not needed")

rid = 0x4444444444444444
served("get_ids_count_max", GET_IDS, 1 << 20, rid, note="count_max = 2^20 is accepted")
rs = issue(NOW_T, 1 << 20, ranges_max(20))
resp_vector("get_ids_count_max_answer", response(GET_IDS, OK, NODE, rid, ranges=rs),
            hdr_fields(GET_IDS, OK, len(rs), NODE, rid, 0), "ok", rs)

rid = 0x0A0B0C0D0E0F1011
served("ping", PING, 0, rid)
resp_vector("ping_answer", response(PING, OK, NODE, rid),
            hdr_fields(PING, OK, 0, NODE, rid, 0), "ok")

rid = 0x1213141516171819
served("info", INFO, 0, rid)
info = (EPOCH_MS, 1, 41, 10, 12, 0, 0, 1)
resp_vector("info_answer", response(INFO, OK, NODE, rid, info=info),
            hdr_fields(INFO, OK, 0, NODE, rid, 0), "ok", info=info,
            note="INFO body: epoch 2024-01-01, 1 ms, 41/10/12, no core bits, 1 worker")

rid = 0x5555555555555555
served("get_ids_retry", GET_IDS, 5, rid, burst=f"now_t={NOW_T} ceiling_t=0",
       note="the ceiling is below the clock: nothing is issued")
resp_vector("get_ids_retry_answer", response(GET_IDS, RETRY, NODE, rid, detail=RETRY_HINT_US),
            hdr_fields(GET_IDS, RETRY, 0, NODE, rid, RETRY_HINT_US), "ok",
            note="RETRY, detail = 1000 microseconds")

rid = 0x6666666666666666
served("get_ids_fenced", GET_IDS, 5, rid, burst=f"now_t={NOW_T} ceiling_t=fenced",
       note="the node lost its node id")
resp_vector("get_ids_fenced_answer", response(GET_IDS, FENCED, NODE, rid),
            hdr_fields(GET_IDS, FENCED, 0, NODE, rid, 0), "ok",
            note="FENCED, detail 0 (fenced_lost): this server holds no node id")

rid = 0x6666666666666667
served("get_ids_draining", GET_IDS, 5, rid, burst=f"now_t={NOW_T} ceiling_t=draining",
       note="the node was drained by its operator (flurryctl drain)")
resp_vector("get_ids_draining_answer", response(GET_IDS, FENCED, NODE, rid, detail=FENCED_DRAINING),
            hdr_fields(GET_IDS, FENCED, 0, NODE, rid, FENCED_DRAINING), "ok",
            note="FENCED, detail 1 (fenced_draining): a planned stop; ask another server")

rid = 0x6666666666666668
served("get_ids_exhausted", GET_IDS, 5, rid, burst=f"now_t={(1 << 41)} ceiling_t={(1 << 41) - 1}",
       note="the clock is past the snowflake layout's last time unit (2^41 - 1): never again")
resp_vector("get_ids_exhausted_answer", response(GET_IDS, EXHAUSTED, NODE, rid),
            hdr_fields(GET_IDS, EXHAUSTED, 0, NODE, rid, 0), "ok",
            note="EXHAUSTED: no ID of this layout can be issued again; asking again is useless")

# ---- a server whose core bits come from the node field ----
NODE_CF, CORE_CF, WORKERS_CF, CB_CF = 100, 5, 8, 3
block([
    "vector: reference_server_core_from_node",
    "kind: server",
    "note: like reference_server, but --core-from node with 8 workers (3 core bits): "
    "node id 100, core 5",
    f"fields: layout=snowflake core_from=node node={NODE_CF} core={CORE_CF} workers={WORKERS_CF} "
    f"retry_hint_us={RETRY_HINT_US} now_t={NOW_T} ceiling_t={CEILING_T}",
])
rid = 0x8888888888888888
data = request(GET_IDS, 0, 5, rid)
req_vector("get_ids_core_from_node", data, req_fields(GET_IDS, 0, 5, rid), "ok", "answered", "yes",
           "get_ids_core_from_node_answer", server="reference_server_core_from_node")
rs = issue(NOW_T, 5, 3, node=NODE_CF, core=CORE_CF, cb=CB_CF, core_from="node")
assert (rs[0][0] >> 12) & 1023 == (NODE_CF << CB_CF) | CORE_CF
resp_vector("get_ids_core_from_node_answer", response(GET_IDS, OK, NODE_CF, rid, ranges=rs),
            hdr_fields(GET_IDS, OK, len(rs), NODE_CF, rid, 0), "ok", rs,
            note="the header's node is the node id, 100; the IDs' 10-bit node field is "
                 "100 << 3 | 5 = 805 (node id and core)")
rid = 0x9999999999999999
data = request(INFO, 0, 0, rid)
req_vector("info_core_from_node", data, req_fields(INFO, 0, 0, rid), "ok", "answered", "yes",
           "info_core_from_node_answer", server="reference_server_core_from_node")
info = (EPOCH_MS, 1, 41, 10, 12, CB_CF, 1, WORKERS_CF)
resp_vector("info_core_from_node_answer", response(INFO, OK, NODE_CF, rid, info=info),
            hdr_fields(INFO, OK, 0, NODE_CF, rid, 0), "ok", info=info,
            note="3 core bits from the node field (core_from 1), 8 workers: node id = node field >> 3")

# ---- dropped ----
base = request(GET_IDS, 0, 5, 0x0102030405060708)
req_vector("drop_too_short", base[:19], None, "too_short", "dropped", "no", "none",
           note="get_ids_basic without its last byte")
req_vector("drop_bad_magic", request(GET_IDS, 0, 5, 0x0102030405060708, magic=0x464D),
           req_fields(GET_IDS, 0, 5, 0x0102030405060708), "bad_magic", "dropped", "no", "none",
           note="magic 0x464d")
req_vector("drop_is_response", response(GET_IDS, OK, NODE, 0x0102030405060708,
                                        ranges=issue(NOW_T, 5, 3)),
           req_fields(GET_IDS | RESPONSE_BIT, 0x0001, 0x01020304, 0x0506070800000000),
           "is_response", "dropped", "no", "none",
           note="get_ids_basic_answer reflected back at the server (read as a request: "
                "opcode 0x81, flags = status and range_count, reserved = node)")

# ---- answered BAD_REQUEST / UNAUTHORIZED ----
def bad(name, data, opcode, flags, count, rid, error, code, status=BAD_REQUEST, encode="no",
        note=None):
    req_vector(name, data, req_fields(opcode, flags, count, rid), error, "answered", encode,
               name + "_answer", note=note)
    resp_vector(name + "_answer", response(opcode, status, NODE, rid, detail=code),
                hdr_fields(opcode, status, 0, NODE, rid, code), "ok")


R = 0x7777777777777777
bad("err_bad_version", request(GET_IDS, 0, 5, R, version=2), GET_IDS, 0, 5, R,
    "bad_version", 16, note="version 2")
bad("err_bad_version_first", request(9, 0x0100, 0, R, version=0, reserved=1), 9, 0x0100, 0, R,
    "bad_version", 16, note="version 0, opcode 9, flags 0x0100, reserved 1: version is checked first")
bad("err_bad_opcode_zero", request(0, 0, 5, R), 0, 0, 5, R, "bad_opcode", 17, encode="yes",
    note="opcode 0; the answer's opcode byte is 0x80")
bad("err_bad_opcode", request(5, 0, 5, R), 5, 0, 5, R, "bad_opcode", 17, encode="yes",
    note="opcode 5")
bad("err_bad_flags", request(GET_IDS, 0x8000, 5, R), GET_IDS, 0x8000, 5, R, "bad_flags", 18,
    encode="yes", note="flag bit 15 is not defined in v1")
bad("err_reserved_nonzero", request(GET_IDS, 0, 5, R, reserved=0x0001), GET_IDS, 0, 5, R,
    "reserved_nonzero", 19, note="reserved = 0x0001")
bad("err_count_zero", request(GET_IDS, 0, 0, R), GET_IDS, 0, 0, R, "count_zero", 20,
    encode="yes")
bad("err_count_too_large", request(GET_IDS, 0, (1 << 20) + 1, R), GET_IDS, 0, (1 << 20) + 1, R,
    "count_too_large", 21, encode="yes", note="count_max + 1 = 1048577")
bad("err_trailing_bytes", request(GET_IDS, 0, 5, R, pad_to=20)[:20] + b"\x00\x00\x01",
    GET_IDS, 0, 5, R, "trailing_bytes", 22, note="23 bytes; the last padding byte is 0x01")
bad("err_count_unexpected", request(PING, 0, 1, R), PING, 0, 1, R, "count_unexpected", 23,
    encode="yes", note="PING with count 1")
bad("err_auth", request(GET_IDS, 0x0001, 5, R), GET_IDS, 0x0001, 5, R, "trailer_short", 33,
    status=UNAUTHORIZED, encode="yes",
    note="flag_auth on a bare header: no room for the 24-byte trailer, answered UNAUTHORIZED")

# ---- GET_SEQ: requests whose name is wrong, and a name the server does not know ----
S = 0xABABABABABABABAB
req_vector("get_seq_unknown", request(GET_SEQ, 0, 5, S, name="nosuch"),
           req_fields(GET_SEQ, 0, 5, S), "ok", "answered", "yes", "get_seq_unknown_answer",
           seq_name="nosuch", note="GET_SEQ, 5 numbers of the sequence \"nosuch\", which nobody created")
resp_vector("get_seq_unknown_answer", response(GET_SEQ, UNKNOWN_SEQUENCE, NODE, S),
            hdr_fields(GET_SEQ, UNKNOWN_SEQUENCE, 0, NODE, S, 0), "ok",
            note="UNKNOWN_SEQUENCE: create it with flurryctl seq create nosuch")
# A server holding three sequences: "orders" (segment; worker 0 holds the sub-block
# [1000, 1100)), "ticks" (monotonic, owned here: next 500, durable limit 600) and "ledger"
# (monotonic, owned by node 3).
SEQ_SERVER = "reference_server_seq"
block([
    f"vector: {SEQ_SERVER}",
    "kind: server",
    "note: like reference_server, with the sequences orders (segment, sub-block [1000, 1100) "
    "on core 0), ticks (monotonic, this node owns it: next 500, durable limit 600) and ledger "
    "(monotonic, owned by node 3)",
    f"fields: layout=snowflake node={NODE} core=0 workers=1 retry_hint_us={RETRY_HINT_US} "
    f"now_t={NOW_T} ceiling_t={CEILING_T} segment=orders segment_first=1000 segment_end=1100 "
    "monotonic=ticks monotonic_next=500 monotonic_limit=600 remote=ledger remote_owner=3",
])


def seq_served(name, seq, count, rid, ranges, status=OK, detail=0, pad_to=20, note=None):
    data = request(GET_SEQ, 0, count, rid, name=seq, pad_to=pad_to)
    req_vector(name, data, req_fields(GET_SEQ, 0, count, rid), "ok", "answered", "yes",
               name + "_answer", server=SEQ_SERVER, seq_name=seq, note=note)
    resp_vector(name + "_answer", response(GET_SEQ, status, NODE, rid, detail=detail, ranges=ranges),
                hdr_fields(GET_SEQ, status, len(ranges), NODE, rid, detail), "ok", ranges)


seq_served("get_seq_segment", "orders", 5, 0x5E05E05E05E05E01, [(1000, 5)],
           note="5 numbers of orders: the start of the worker's sub-block")
seq_served("get_seq_segment_partial", "orders", 200, 0x5E05E05E05E05E02, [(1000, 100)],
           note="200 asked, the worker holds 100: a partial answer (ask again)")
seq_served("get_seq_monotonic", "ticks", 5, 0x5E05E05E05E05E03, [(500, 5)], pad_to=32,
           note="monotonic: the node's shared counter; 32 bytes (padded) buy 4 ranges")
seq_served("get_seq_not_owner", "ledger", 5, 0x5E05E05E05E05E04, [], status=NOT_OWNER, detail=3,
           note="ledger is served by node 3: NOT_OWNER, detail 3")

bad("err_name_missing", request(GET_SEQ, 0, 5, S), GET_SEQ, 0, 5, S, "name_missing", 24,
    note="GET_SEQ with nothing after the header")
bad("err_name_empty", request(GET_SEQ, 0, 5, S, pad_to=24), GET_SEQ, 0, 5, S, "name_missing", 24,
    note="GET_SEQ whose length byte is 0")
bad("err_name_too_long", request(GET_SEQ, 0, 5, S, name="x" * 33), GET_SEQ, 0, 5, S,
    "name_too_long", 25, note="a 33-byte name (at most 32)")
bad("err_name_truncated", request(GET_SEQ, 0, 5, S, name="orders")[:24], GET_SEQ, 0, 5, S,
    "name_truncated", 26, note="length 6, but the datagram ends after 3 name bytes")
bad("err_name_bad", request(GET_SEQ, 0, 5, S, name="a/b"), GET_SEQ, 0, 5, S, "name_bad", 27,
    note="'/' is not a name byte ([A-Za-z0-9_.:-])")
bad("err_seq_trailing_bytes", request(GET_SEQ, 0, 5, S, name="orders") + b"\x00\x07", GET_SEQ, 0, 5, S,
    "trailing_bytes", 22, note="a nonzero byte in the padding after the name")
bad("err_seq_count_zero", request(GET_SEQ, 0, 0, S, name="orders"), GET_SEQ, 0, 0, S, "count_zero", 20,
    note="GET_SEQ has the count bounds of GET_IDS")

# ---- responses that a client rejects (PROTOCOL.md "Response decoding", in its order) ----
RID = 0x0102030405060708
resp_vector("resp_too_short", response(PING, OK, NODE, 1)[:19], None, "too_short",
            note="ping_answer-like header without its last byte")
bad_m = bytearray(response(PING, OK, NODE, 1))
bad_m[1] = 0x4D
resp_vector("resp_bad_magic", bytes(bad_m), hdr_fields(PING, OK, 0, NODE, 1, 0), "bad_magic",
            note="magic 0x464d")
bad_v = bytearray(response(PING, OK, NODE, 1))
bad_v[2] = 2
resp_vector("resp_bad_version", bytes(bad_v), hdr_fields(PING, OK, 0, NODE, 1, 0),
            "bad_version")
resp_vector("resp_not_response", request(GET_IDS, 0, 5, RID),
            hdr_fields(GET_IDS, 0, 0, 0, 0x0000000501020304, 0x05060708), "not_response",
            note="get_ids_basic (a request) read as a response: bit 7 of byte 3 is clear")
resp_vector("resp_bad_status", response(GET_IDS, 8, NODE, RID), hdr_fields(GET_IDS, 8, 0, NODE, RID, 0),
            "bad_status", note="status 8 is not a v1 status")
resp_vector("resp_status_unexpected_exhausted", response(INFO, EXHAUSTED, NODE, RID),
            hdr_fields(INFO, EXHAUSTED, 0, NODE, RID, 0), "status_unexpected",
            note="EXHAUSTED answers GET_IDS and GET_SEQ only")
resp_vector("resp_bad_opcode", response(5, OK, NODE, RID), hdr_fields(5, OK, 0, NODE, RID, 0),
            "bad_opcode", note="opcode 5 answered OK: an unknown opcode comes back only as BAD_REQUEST")
resp_vector("resp_status_unexpected_seq", response(GET_IDS, UNKNOWN_SEQUENCE, NODE, RID),
            hdr_fields(GET_IDS, UNKNOWN_SEQUENCE, 0, NODE, RID, 0), "status_unexpected",
            note="GET_IDS answered UNKNOWN_SEQUENCE: statuses 5 and 6 answer GET_SEQ only")
resp_vector("resp_status_unexpected", response(PING, RETRY, NODE, RID, detail=RETRY_HINT_US),
            hdr_fields(PING, RETRY, 0, NODE, RID, RETRY_HINT_US), "status_unexpected",
            note="PING answered RETRY: RETRY and FENCED answer GET_IDS only")
rs = issue(NOW_T, 5, 3)
resp_vector("resp_ranges_unexpected_retry",
            response(GET_IDS, RETRY, NODE, RID, detail=RETRY_HINT_US, ranges=rs),
            hdr_fields(GET_IDS, RETRY, 1, NODE, RID, RETRY_HINT_US), "ranges_unexpected",
            note="RETRY carrying a range: only OK GET_IDS answers carry ranges; its IDs must not be used")
info_with_range = response(INFO, OK, NODE, RID, info=(EPOCH_MS, 1, 41, 10, 12, 0, 0, 1),
                           range_count=1) + struct.pack(">QI", *rs[0])
resp_vector("resp_ranges_unexpected_info", info_with_range,
            hdr_fields(INFO, OK, 1, NODE, RID, 0), "ranges_unexpected",
            note="INFO OK with range_count 1 (INFO body, then a range)")
resp_vector("resp_ranges_missing", response(GET_IDS, OK, NODE, RID),
            hdr_fields(GET_IDS, OK, 0, NODE, RID, 0), "ranges_missing",
            note="GET_IDS OK without a range: a server with nothing to issue answers RETRY")
short = response(GET_IDS, OK, NODE, RID, ranges=rs)[:-1]
resp_vector("resp_bad_length", short, hdr_fields(GET_IDS, OK, 1, NODE, RID, 0),
            "bad_length", note="get_ids_basic_answer without its last byte")
first = rs[0][0]
resp_vector("resp_bad_range_empty", response(GET_IDS, OK, NODE, RID, ranges=[(first, 0)]),
            hdr_fields(GET_IDS, OK, 1, NODE, RID, 0), "bad_range", note="a range of count 0")
resp_vector("resp_bad_range_overlap",
            response(GET_IDS, OK, NODE, RID, ranges=[(first, 5), (first + 4, 5)]),
            hdr_fields(GET_IDS, OK, 2, NODE, RID, 0), "bad_range",
            note="the second range starts inside the first (ID first + 4 twice)")
resp_vector("resp_bad_range_order",
            response(GET_IDS, OK, NODE, RID, ranges=[(first + 4096, 5), (first, 5)]),
            hdr_fields(GET_IDS, OK, 2, NODE, RID, 0), "bad_range",
            note="ranges out of order")
resp_vector("resp_bad_range_sign",
            response(GET_IDS, OK, NODE, RID, ranges=[((1 << 63) - 2, 5)]),
            hdr_fields(GET_IDS, OK, 1, NODE, RID, 0), "bad_range",
            note="a range that reaches 2^63: IDs keep bit 63 clear")

# ---- IDs ----
def id_vector(name, layout, t, node, core, counter, unit, epoch, note=None):
    tb, nb, sb, cb, cf = layout
    i = snowflake_id(t, node, core, counter, tb, nb, sb, cb, cf)
    unix_ms = epoch + t * unit
    import datetime
    utc = datetime.datetime.fromtimestamp(unix_ms / 1000, datetime.timezone.utc)
    utc_text = utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{unix_ms % 1000:03d}Z"
    lines = [f"vector: {name}", "kind: id"]
    if note:
        lines.append(f"note: {note}")
    lines += [
        f"layout: time_bits={tb} node_bits={nb} sequence_bits={sb} core_bits={cb} "
        f"core_from={cf} epoch_ms={epoch} time_unit_ms={unit}",
        f"id: {i}",
        f"id_hex: 0x{i:016x}",
        f"fields: time={t} unix_ms={unix_ms} node={node} core={core} counter={counter}",
        f"utc: {utc_text}",
    ]
    block(lines)
    return i


SNOW = (41, 10, 12, 0, "sequence")
id_vector("id_snowflake_first", SNOW, NOW_T, NODE, 0, 0, 1, EPOCH_MS,
          note="the first ID of get_ids_basic_answer")
id_vector("id_snowflake", SNOW, NOW_T + 123_456, NODE, 0, 42, 1, EPOCH_MS)
id_vector("id_snowflake_core2", (41, 10, 12, 2, "sequence"), NOW_T + 1, 300, 3, 1000, 1,
          EPOCH_MS, note="4 workers: the top 2 sequence bits are the core, 10 counter bits")
id_vector("id_core_from_node", (41, 10, 12, 3, "node"), NOW_T + 2, 100, 5, 4095, 1, EPOCH_MS,
          note="8 workers, core bits from the node field: 7-bit node id, 3-bit core")
JS = (37, 5, 11, 0, "sequence")
id_vector("id_js_safe", JS, NOW_T // 10 + 12_345, 31, 0, 2047, 10, EPOCH_MS,
          note="js-safe preset: 10 ms units, 53 bits")
m = id_vector("id_js_safe_max", JS, (1 << 37) - 1, 31, 0, 2047, 10, EPOCH_MS,
              note="the largest js-safe ID: 2^53 - 1")
assert m == (1 << 53) - 1
TW = 1_288_834_974_657
id_vector("id_twitter_epoch", SNOW, 1_800_000_000_000_000_000 >> 22,
          (1_800_000_000_000_000_000 >> 12) & 1023, 0, 1_800_000_000_000_000_000 & 4095, 1, TW,
          note="epoch 2010-11-04T01:42:54.657Z (Twitter's): 1800000000000000000 decoded")



# ---- signed requests and answers (PROTOCOL.md "Authentication") ----
def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & 0xFFFFFFFFFFFFFFFF


def siphash24(key, data):
    """SipHash-2-4 as in Aumasson and Bernstein's paper, only to compute these vectors
    independently of libsodium (which the C++ code uses); checked against the paper's vector."""
    M = 0xFFFFFFFFFFFFFFFF
    k0, k1 = struct.unpack("<QQ", key)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261,
         k1 ^ 0x7465646279746573]

    def rounds(n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & M; v[1] = _rotl(v[1], 13) ^ v[0]; v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & M; v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & M; v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & M; v[1] = _rotl(v[1], 17) ^ v[2]; v[2] = _rotl(v[2], 32)
    tail = len(data) % 8
    for i in range(0, len(data) - tail, 8):
        m = struct.unpack("<Q", data[i:i + 8])[0]
        v[3] ^= m; rounds(2); v[0] ^= m
    last = (len(data) & 0xFF) << 56
    for i, byte in enumerate(data[len(data) - tail:]):
        last |= byte << (8 * i)
    v[3] ^= last; rounds(2); v[0] ^= last
    v[2] ^= 0xFF; rounds(4)
    return struct.pack("<Q", v[0] ^ v[1] ^ v[2] ^ v[3])


assert siphash24(bytes(range(16)), bytes(range(15))).hex() == "e545be4961ca29a1"  # the paper's

KEY_ID, KEY = 7, bytes(range(16))
STAMP_US = (EPOCH_MS + NOW_T) * 1000  # the reference server's clock


ANY_SERVER = 0xFFFFFFFF


def signed_request(opcode, count, request_id, size=44, key=KEY, key_id=KEY_ID, server=NODE, stamp_us=STAMP_US):
    body = request(opcode, 0x0001, count, request_id, pad_to=size - 24)
    body += struct.pack(">IIQ", key_id, server, stamp_us)
    return body + siphash24(key, body)


def signed_answer(answer, request_bytes, key=KEY):
    return answer + siphash24(key, answer + request_bytes[-8:])


def signed_vector(name, data, fields, lines):
    block([f"vector: {name}", "kind: signed"] + hexlines(data) + [f"size: {len(data)}", "fields: " + fields]
          + lines)


def signed_pair(name, opcode, count, rid, size, answer, note, server=NODE, stamp_us=STAMP_US):
    """A signed request and the reference server's signed answer; the server's clock is
    STAMP_US (`server_clock_ms`), whatever the request's timestamp says."""
    data = signed_request(opcode, count, rid, size, server=server, stamp_us=stamp_us)
    signed_vector(name, data, req_fields(opcode, 0x0001, count, rid),
                  [f"note: {note}", f"key: id={KEY_ID} secret={KEY.hex()}",
                   f"trailer: key_id={KEY_ID} server={server} timestamp_us={stamp_us} mac=0x{data[-8:].hex()}",
                   f"server_clock_ms: {STAMP_US // 1000}",
                   f"answer: {name}_answer"])
    reply = signed_answer(answer, data)
    status, range_count = answer[4], answer[5]
    detail = struct.unpack(">I", answer[16:20])[0]
    signed_vector(name + "_answer", reply, hdr_fields(opcode, status, range_count, NODE, rid, detail),
                  [f"request_mac: 0x{data[-8:].hex()}", f"answer_mac: 0x{reply[-8:].hex()}"])


SR = 0xABABABABABABABAB
signed_pair("signed_get_ids", GET_IDS, 5, SR, 44,
            response(GET_IDS, OK, NODE, SR, ranges=issue(NOW_T, 5, 8)),
            "44 bytes: header, trailer (key 7, for node 5, the reference clock), MAC over bytes 0..35")
signed_pair("signed_ping_padded", PING, 0, SR + 1, 56, response(PING, OK, NODE, SR + 1),
            "56 bytes: 12 zero bytes of padding between the header and the trailer; PING and INFO "
            "may name any server (0xFFFFFFFF)", server=ANY_SERVER)
signed_pair("signed_get_ids_any_server", GET_IDS, 5, SR + 2, 44,
            response(GET_IDS, UNAUTHORIZED, NODE, SR + 2, detail=42),
            "GET_IDS signed for any server (a client's first request to a server whose node id it does "
            "not know yet): UNAUTHORIZED wrong_server (42), signed, its node in the header; the client "
            "signs again for node 5", server=ANY_SERVER)
signed_pair("signed_get_ids_stale", GET_IDS, 5, SR + 3, 44,
            response(GET_IDS, UNAUTHORIZED, NODE, SR + 3, detail=35),
            "stamped 6 s before the server's clock (the window is 5 s): UNAUTHORIZED stale_timestamp "
            "(35), signed: the MAC verified, so the client can trust what its clock is told",
            stamp_us=STAMP_US - 6_000_000)

generated = "\n\n".join(blocks) + f"\n\n<!-- {len(blocks)} vectors -->\n"
if len(sys.argv) == 1:
    sys.stdout.write(generated)
    sys.exit(0)
doc_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto",
                        "PROTOCOL.md")
with open(doc_path, encoding="utf-8") as f:
    doc = f.read()
start = doc.find("```\nvector: ")
if start < 0:
    sys.exit("no vector blocks found in " + doc_path)
if sys.argv[1] == "--check":
    if doc[start:] != generated:
        sys.exit("proto/PROTOCOL.md test vectors differ from tests/proto/make_vectors.py")
    print(f"{len(blocks)} vectors match")
elif sys.argv[1] == "--write":
    with open(doc_path, "w", encoding="utf-8") as f:
        f.write(doc[:start] + generated)
    print(f"wrote {len(blocks)} vectors to {doc_path}")
else:
    sys.exit("usage: make_vectors.py [--write | --check]")
