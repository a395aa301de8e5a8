"""flurry wire format v1 (proto/PROTOCOL.md): request encoding, response decoding, sizing.

Contract:
  * Byte-exact with PROTOCOL.md; every integer big-endian, handled only by the struct
    formats below.
  * decode_response applies "Response decoding" rules 1-12 in order and stops at the first
    failure; rules 13-15 need the request and live in check_answer. Neither ever raises on
    untrusted bytes: the failure is returned as a ResponseError.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

MAGIC = 0x464C
VERSION = 1
REQUEST_HEADER_SIZE = 20
RESPONSE_HEADER_SIZE = 20
RANGE_SIZE = 12
INFO_BODY_SIZE = 16
DATAGRAM_SIZE_MAX = 1472
COUNT_MAX = 1 << 20
AMPLIFICATION_MAX = 3
OPCODE_RESPONSE_BIT = 0x80
FLAG_AUTH = 0x0001
ID_BITS_MAX = 63
SEQ_NAME_SIZE_MAX = 32
SEQ_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-:")

_REQUEST = struct.Struct(">HBBHHIQ")  # magic version opcode flags reserved count request_id
_RESPONSE = struct.Struct(">HBBBBHQI")  # magic version opcode status range_count node id detail
_RANGE = struct.Struct(">QI")
_INFO = struct.Struct(">QHBBBBBB")


class Opcode(enum.IntEnum):
    GET_IDS = 1
    PING = 2
    INFO = 3
    GET_SEQ = 4


class Status(enum.IntEnum):
    OK = 0
    RETRY = 1
    BAD_REQUEST = 2
    UNAUTHORIZED = 3
    FENCED = 4
    UNKNOWN_SEQUENCE = 5
    NOT_OWNER = 6
    EXHAUSTED = 7


# NOT_OWNER's detail when no node owns the sequence now (else the owner's node id).
NOT_OWNER_UNKNOWN = 0xFFFF_FFFF
# FENCED's detail: the server holds no node id (lost, or not claimed yet); any value but
# FENCED_DRAINING reads as this.
FENCED_LOST = 0
# FENCED's detail: its operator drained it before a planned stop.
FENCED_DRAINING = 1
# A signed request's `server` when the client does not know the server's node id yet (served
# for PING and INFO only; GET_IDS and GET_SEQ are answered wrong_server naming the node).
ANY_SERVER = 0xFFFF_FFFF
# The shortest signed request: the header and the 24-byte trailer.
SIGNED_REQUEST_SIZE_MIN = 44


class RequestError(enum.IntEnum):
    """The numbers a BAD_REQUEST / UNAUTHORIZED answer carries in `detail`."""

    OK = 0
    TOO_SHORT = 1
    BAD_MAGIC = 2
    TOO_LONG = 3
    IS_RESPONSE = 4
    BAD_VERSION = 16
    BAD_OPCODE = 17
    BAD_FLAGS = 18
    RESERVED_NONZERO = 19
    COUNT_ZERO = 20
    COUNT_TOO_LARGE = 21
    TRAILING_BYTES = 22
    COUNT_UNEXPECTED = 23
    NAME_MISSING = 24
    NAME_TOO_LONG = 25
    NAME_TRUNCATED = 26
    NAME_BAD = 27
    AUTH_UNSUPPORTED = 32
    TRAILER_SHORT = 33
    UNKNOWN_KEY = 34
    STALE_TIMESTAMP = 35
    BAD_MAC = 36
    REPLAY = 37
    REPLAY_FULL = 38
    NOT_PERMITTED = 39
    RATE_LIMITED = 40
    AUTH_REQUIRED = 41
    WRONG_SERVER = 42


def request_error_name(number: int) -> str:
    """The name of a RequestError number, or "unknown" for one v1 does not define."""
    try:
        return RequestError(number).name.lower()
    except ValueError:
        return "unknown"


class ResponseError(enum.IntEnum):
    """Why decode_response rejected a datagram (PROTOCOL.md rules 1-12), in check order."""

    OK = 0
    TOO_SHORT = 1
    BAD_MAGIC = 2
    TOO_LONG = 3
    BAD_VERSION = 4
    NOT_RESPONSE = 5
    BAD_STATUS = 6
    BAD_OPCODE = 7
    STATUS_UNEXPECTED = 8
    RANGES_UNEXPECTED = 9
    RANGES_MISSING = 10
    BAD_LENGTH = 11
    BAD_RANGE = 12


@dataclass(frozen=True)
class Request:
    opcode: int
    count: int
    request_id: int
    flags: int = 0
    name: bytes = b""  # GET_SEQ: the sequence's name


@dataclass(frozen=True)
class Info:
    """The 16-byte INFO body: everything needed to decode the server's IDs."""

    epoch_ms: int
    time_unit_ms: int
    time_bits: int
    node_bits: int
    sequence_bits: int
    core_bits: int
    core_from: int
    workers: int

    def ids_per_range(self) -> int:
        """IDs one range holds at most (one core, one time unit)."""
        counter_bits = self.sequence_bits - (self.core_bits if self.core_from == 0 else 0)
        return 1 << max(counter_bits, 0)


@dataclass
class Response:
    opcode: int  # without the response bit
    status: int
    range_count: int
    node: int
    request_id: int
    detail: int
    ranges: list[tuple[int, int]] = field(default_factory=list)  # (first, count)
    info: Info | None = None

    def id_count(self) -> int:
        return sum(count for _, count in self.ranges)


def encode_request(request: Request, padded_size: int = REQUEST_HEADER_SIZE) -> bytes:
    """The request header, zero-padded to padded_size bytes (at least the header)."""
    if padded_size > DATAGRAM_SIZE_MAX:
        raise ValueError(f"padded size {padded_size} is above {DATAGRAM_SIZE_MAX} bytes")
    header = _REQUEST.pack(MAGIC, VERSION, request.opcode, request.flags, 0, request.count,
                           request.request_id)
    if request.opcode == Opcode.GET_SEQ:
        header += bytes([len(request.name)]) + request.name
    return header + bytes(max(padded_size - len(header), 0))


def encode_response(response: Response) -> bytes:
    """Header, then ranges or the INFO body, as a server writes them (for tests and fakes)."""
    out = bytearray(_RESPONSE.pack(MAGIC, VERSION, response.opcode | OPCODE_RESPONSE_BIT,
                                   response.status, response.range_count, response.node,
                                   response.request_id, response.detail))
    if response.info is not None:
        i = response.info
        out += _INFO.pack(i.epoch_ms, i.time_unit_ms, i.time_bits, i.node_bits, i.sequence_bits,
                          i.core_bits, i.core_from, i.workers)
    for first, count in response.ranges:
        out += _RANGE.pack(first, count)
    return bytes(out)


# The RequestErrors a server drops without an answer; every other one is answered.
DROPPED = frozenset({RequestError.TOO_SHORT, RequestError.BAD_MAGIC, RequestError.TOO_LONG,
                     RequestError.IS_RESPONSE, RequestError.UNKNOWN_KEY, RequestError.BAD_MAC,
                     RequestError.REPLAY, RequestError.REPLAY_FULL})


def decode_request(datagram: bytes) -> RequestError:
    """The server's check of a request ("Request errors", in order), then, for a signed one,
    what a server with --auth off says (auth_unsupported); for tests and fakes: a client never
    receives requests."""
    if len(datagram) < REQUEST_HEADER_SIZE:
        return RequestError.TOO_SHORT
    magic, version, opcode, flags, reserved, count, _ = _REQUEST.unpack_from(datagram)
    issues = opcode in (Opcode.GET_IDS, Opcode.GET_SEQ)
    signed = bool(flags & FLAG_AUTH)
    # A signed request's name and padding end where its 24-byte trailer starts.
    body = datagram[:-24] if signed and len(datagram) >= SIGNED_REQUEST_SIZE_MIN else datagram
    body_end, name_error = _name_check(body) if opcode == Opcode.GET_SEQ else (20, None)
    checks = [
        (magic != MAGIC, RequestError.BAD_MAGIC),
        (len(datagram) > DATAGRAM_SIZE_MAX, RequestError.TOO_LONG),
        (opcode & OPCODE_RESPONSE_BIT, RequestError.IS_RESPONSE),
        (version != VERSION, RequestError.BAD_VERSION),
        (not Opcode.GET_IDS <= opcode <= Opcode.GET_SEQ, RequestError.BAD_OPCODE),
        (flags & ~FLAG_AUTH, RequestError.BAD_FLAGS),
        (reserved != 0, RequestError.RESERVED_NONZERO),
        # A signed request ends with a 24-byte trailer.
        (signed and len(datagram) < SIGNED_REQUEST_SIZE_MIN, RequestError.TRAILER_SHORT),
        (name_error is not None, name_error or RequestError.OK),
        (any(body[body_end:]), RequestError.TRAILING_BYTES),
        (issues and count == 0, RequestError.COUNT_ZERO),
        (issues and count > COUNT_MAX, RequestError.COUNT_TOO_LARGE),
        (not issues and count != 0, RequestError.COUNT_UNEXPECTED),
        # Then the key checks ("Authentication"); this is a server with --auth off.
        (signed, RequestError.AUTH_UNSUPPORTED),
    ]
    return next((error for failed, error in checks if failed), RequestError.OK)


def _name_check(datagram: bytes) -> tuple[int, RequestError | None]:
    """The GET_SEQ body: where the padding starts, and the name's error if any."""
    if len(datagram) <= REQUEST_HEADER_SIZE or datagram[REQUEST_HEADER_SIZE] == 0:
        return REQUEST_HEADER_SIZE, RequestError.NAME_MISSING
    size = datagram[REQUEST_HEADER_SIZE]
    if size > SEQ_NAME_SIZE_MAX:
        return REQUEST_HEADER_SIZE, RequestError.NAME_TOO_LONG
    end = REQUEST_HEADER_SIZE + 1 + size
    if len(datagram) < end:
        return REQUEST_HEADER_SIZE, RequestError.NAME_TRUNCATED
    if any(b not in SEQ_NAME_BYTES for b in datagram[REQUEST_HEADER_SIZE + 1:end]):
        return REQUEST_HEADER_SIZE, RequestError.NAME_BAD
    return end, None


def read_request_fields(datagram: bytes) -> dict[str, int]:
    """What the first 20 bytes of a request say, read at their offsets, nothing checked."""
    _, _, opcode, flags, _, count, request_id = _REQUEST.unpack_from(datagram)
    return {"opcode": opcode, "flags": flags, "count": count, "request_id": request_id}


def read_response_fields(datagram: bytes) -> dict[str, int]:
    """What the first 20 bytes of a response say, read at their offsets, nothing checked."""
    _, _, opcode, status, range_count, node, request_id, detail = _RESPONSE.unpack_from(datagram)
    return {"opcode": opcode & ~OPCODE_RESPONSE_BIT, "status": status, "range_count": range_count,
            "node": node, "request_id": request_id, "detail": detail}


def _check_header(r: Response) -> ResponseError:
    """Rules 6-10 on a header whose magic, version and response bit are right."""
    if r.status > Status.EXHAUSTED:
        return ResponseError.BAD_STATUS
    known_opcode = Opcode.GET_IDS <= r.opcode <= Opcode.GET_SEQ
    # A server echoes an unknown opcode only to say BAD_REQUEST (bad_opcode or bad_version).
    if not known_opcode and r.status != Status.BAD_REQUEST:
        return ResponseError.BAD_OPCODE
    issues = r.opcode in (Opcode.GET_IDS, Opcode.GET_SEQ)
    if not issues and r.status in (Status.RETRY, Status.FENCED, Status.EXHAUSTED):
        return ResponseError.STATUS_UNEXPECTED
    if r.opcode != Opcode.GET_SEQ and r.status in (Status.UNKNOWN_SEQUENCE, Status.NOT_OWNER):
        return ResponseError.STATUS_UNEXPECTED
    carries_ranges = issues and r.status == Status.OK
    if not carries_ranges and r.range_count != 0:
        return ResponseError.RANGES_UNEXPECTED
    if carries_ranges and r.range_count == 0:
        return ResponseError.RANGES_MISSING
    return ResponseError.OK


def _read_ranges(body: bytes, r: Response) -> ResponseError:
    """Rule 12: ranges nonempty, below 2^63, increasing without overlap."""
    id_limit = 1 << ID_BITS_MAX
    next_free = 0  # every ID below this is in an earlier range
    for first, count in _RANGE.iter_unpack(body):
        if count == 0 or first < next_free or first + count > id_limit:
            return ResponseError.BAD_RANGE
        next_free = first + count
        r.ranges.append((first, count))
    return ResponseError.OK


def decode_response(datagram: bytes) -> tuple[ResponseError, Response | None]:
    """Rules 1-12 of "Response decoding"; the Response only when the error is OK."""
    size = len(datagram)
    if size < RESPONSE_HEADER_SIZE:
        return ResponseError.TOO_SHORT, None
    magic, version, opcode_byte, status, range_count, node, request_id, detail = \
        _RESPONSE.unpack_from(datagram)
    if magic != MAGIC:
        return ResponseError.BAD_MAGIC, None
    if size > DATAGRAM_SIZE_MAX:
        return ResponseError.TOO_LONG, None
    if version != VERSION:
        return ResponseError.BAD_VERSION, None
    if not opcode_byte & OPCODE_RESPONSE_BIT:
        return ResponseError.NOT_RESPONSE, None
    r = Response(opcode_byte & ~OPCODE_RESPONSE_BIT, status, range_count, node, request_id, detail)
    error = _check_header(r)
    if error != ResponseError.OK:
        return error, None
    body = bytes(datagram[RESPONSE_HEADER_SIZE:])
    is_info = r.opcode == Opcode.INFO and r.status == Status.OK
    if len(body) != (INFO_BODY_SIZE if is_info else range_count * RANGE_SIZE):
        return ResponseError.BAD_LENGTH, None
    if is_info:
        r.info = Info(*_INFO.unpack(body))
        return ResponseError.OK, r
    error = _read_ranges(body, r)
    return error, (r if error == ResponseError.OK else None)


def consistent(response: Response, request: Request) -> bool:
    """Rules 14-15 (rule 13, the request id, is checked apart): same opcode, no extra IDs."""
    if response.opcode != request.opcode:
        return False
    return response.id_count() <= request.count


# ---- anti-amplification and request sizing ("how a client asks for N IDs") ----

def response_size_max(request_size: int) -> int:
    return min(AMPLIFICATION_MAX * request_size, DATAGRAM_SIZE_MAX)


def ranges_max(request_size: int) -> int:
    room = response_size_max(request_size)
    return 0 if room <= RESPONSE_HEADER_SIZE else min(255, (room - RESPONSE_HEADER_SIZE) // RANGE_SIZE)


def request_size_for_ranges(ranges: int) -> int:
    response = RESPONSE_HEADER_SIZE + ranges * RANGE_SIZE
    return max(REQUEST_HEADER_SIZE, -(-response // AMPLIFICATION_MAX))


def ranges_for_ids(count: int, ids_per_range: int) -> int:
    """ceil(count / ids_per_range) + 1 (the first range may start mid-unit), capped."""
    per_range = max(ids_per_range, 1)
    return min(-(-count // per_range) + 1, ranges_max(DATAGRAM_SIZE_MAX))


def request_size_for_ids(count: int, ids_per_range: int) -> int:
    return request_size_for_ranges(ranges_for_ids(count, ids_per_range))
