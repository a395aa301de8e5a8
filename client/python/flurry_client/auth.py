"""Signed requests and answers (proto/PROTOCOL.md "Authentication"), as proto/auth.cc does
them: SipHash-2-4 written here, so the client still needs nothing beyond the standard library.

Contract:
  * A signed request is the header, any body (GET_SEQ's name) and zero padding with flag_auth
    set, then the 24-byte trailer: key id (u32, big-endian), server (u32, big-endian: the node
    id of the server the request is for, or ANY_SERVER), timestamp_us (u64, big-endian),
    MAC = SipHash-2-4 keyed with the secret over every byte before the MAC.
  * A signed answer ends with 8 MAC bytes = SipHash-2-4 over (the answer's bytes before them,
    then the request's 8 MAC bytes). verify_answer never raises on untrusted bytes.
  * MACs are the 8 bytes SipHash-2-4 outputs, in the order it writes them (little-endian, as
    libsodium's crypto_shorthash and the reference implementation write them).
"""

from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass

from .wire import (DATAGRAM_SIZE_MAX, FLAG_AUTH, REQUEST_HEADER_SIZE,
                   RESPONSE_HEADER_SIZE, SIGNED_REQUEST_SIZE_MIN, Request, encode_request)

SECRET_SIZE = 16
MAC_SIZE = 8
AUTH_TRAILER_SIZE = 24  # key id, server, timestamp_us, MAC
ANSWER_MAC_SIZE = MAC_SIZE
SIGNED_ANSWER_SIZE_MIN = RESPONSE_HEADER_SIZE + ANSWER_MAC_SIZE  # 28
KEY_ID_MAX = 0xFFFF_FFFF
assert SIGNED_REQUEST_SIZE_MIN == REQUEST_HEADER_SIZE + AUTH_TRAILER_SIZE

_MASK = 0xFFFF_FFFF_FFFF_FFFF
_TRAILER_FIELDS = struct.Struct(">IIQ")  # key id, server, timestamp_us


@dataclass(frozen=True)
class Key:
    """An authentication key: the id of the server's key file and its 16-byte secret."""

    id: int
    secret: bytes

    def __repr__(self) -> str:  # a secret never ends up in a log line or a traceback
        return f"Key(id={self.id}, secret=<{len(self.secret)} bytes>)"


def _rotl(x: int, bits: int) -> int:
    return ((x << bits) | (x >> (64 - bits))) & _MASK


def _rounds(v: list[int], n: int) -> None:
    v0, v1, v2, v3 = v
    for _ in range(n):
        v0 = (v0 + v1) & _MASK
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _MASK
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & _MASK
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & _MASK
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)
    v[:] = v0, v1, v2, v3


def siphash24(secret: bytes, data: bytes) -> bytes:
    """SipHash-2-4 (Aumasson and Bernstein) of `data` keyed with the 16-byte `secret`."""
    k0, k1 = struct.unpack("<QQ", secret)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]
    whole = len(data) - len(data) % 8
    for (m,) in struct.iter_unpack("<Q", memoryview(data)[:whole]):
        v[3] ^= m
        _rounds(v, 2)
        v[0] ^= m
    # The last word: the tail bytes, and the message length's low byte on top.
    last = int.from_bytes(data[whole:], "little") | (len(data) & 0xFF) << 56
    v[3] ^= last
    _rounds(v, 2)
    v[0] ^= last
    v[2] ^= 0xFF
    _rounds(v, 4)
    return struct.pack("<Q", v[0] ^ v[1] ^ v[2] ^ v[3])


def sign_request(request: Request, size: int, key: Key, server: int, timestamp_us: int) -> bytes:
    """The signed request of `size` bytes (flag_auth set whatever request.flags says) for the
    server of node id `server` (ANY_SERVER when not known yet), grown where the body and the
    trailer need more. ValueError above DATAGRAM_SIZE_MAX."""
    unsigned = encode_request(request, 0)  # header and body: the least the padding follows
    size = max(size, len(unsigned) + AUTH_TRAILER_SIZE)
    if size > DATAGRAM_SIZE_MAX:
        raise ValueError(f"signed request of {size} bytes is above {DATAGRAM_SIZE_MAX} bytes")
    flagged = Request(request.opcode, request.count, request.request_id,
                      request.flags | FLAG_AUTH, request.name)
    signed = encode_request(flagged, size - AUTH_TRAILER_SIZE)
    signed += _TRAILER_FIELDS.pack(key.id, server, timestamp_us)
    return signed + siphash24(key.secret, signed)


def request_mac(datagram: bytes) -> bytes:
    """The MAC of a signed request: its last 8 bytes."""
    return bytes(datagram[-MAC_SIZE:])


def sign_answer(answer: bytes, mac_of_request: bytes, key: Key) -> bytes:
    """The answer with its MAC appended (what a server does; for tests and fakes)."""
    return answer + siphash24(key.secret, answer + mac_of_request)


def verify_answer(answer: bytes, mac_of_request: bytes, key: Key) -> bool:
    """True when `answer` is long enough to be signed and ends with the right MAC for the
    request whose MAC was `mac_of_request`; the caller then decodes answer[:-8]."""
    if not SIGNED_ANSWER_SIZE_MIN <= len(answer) <= DATAGRAM_SIZE_MAX:
        return False
    body = bytes(answer[:-ANSWER_MAC_SIZE])
    expected = siphash24(key.secret, body + mac_of_request)
    # Compared in constant time: no early exit tells a forger how many bytes were right.
    return hmac.compare_digest(expected, bytes(answer[-ANSWER_MAC_SIZE:]))
