"""A scripted UDP server on 127.0.0.1 for the behaviour tests: each request is handed to a
`script(server, request_fields, datagram)` that returns the datagrams to send back (maybe
none). Records every request with its arrival time. Every answer's header names the server's
`node`. Runs on its own thread; stop() joins it.

With a `key` it checks signed requests as a server with --auth required does: a request whose
MAC does not verify (or that names another key id) is counted in `bad_macs` and dropped before
the script sees it; a GET_IDS or GET_SEQ signed for another node id than the server's (or for
any server) is answered UNAUTHORIZED wrong_server, signed, naming the server's node, and
counted in `wrong_servers`, before the script sees it; the answers to a verified one are
signed, except those the script returns as Unsigned(bytes)."""

from __future__ import annotations

import select
import socket
import threading
import time

from flurry_client.auth import AUTH_TRAILER_SIZE, Key, request_mac, siphash24, sign_answer
from flurry_client.wire import (FLAG_AUTH, REQUEST_HEADER_SIZE, Info, Opcode, RequestError,
                                Response, Status, encode_response, ranges_max,
                                read_request_fields)

BASE_ID = 0x01D735E200005000  # get_ids_basic_answer's first ID
PER_RANGE = 4096


# The key the behaviour tests sign with: proto's vectors' key 7.
TEST_KEY = Key(7, bytes(range(16)))


class Unsigned(bytes):
    """An answer a script wants sent as it is, never signed (an unsigned refusal, or a forgery)."""


def verifies(datagram: bytes, key: Key) -> bool:
    """A signed request whose trailer names `key` and whose MAC verifies with it."""
    if len(datagram) < REQUEST_HEADER_SIZE + AUTH_TRAILER_SIZE:
        return False
    key_id = int.from_bytes(datagram[-AUTH_TRAILER_SIZE:-AUTH_TRAILER_SIZE + 4], "big")
    return key_id == key.id and siphash24(key.secret, datagram[:-8]) == request_mac(datagram)


def trailer_server(datagram: bytes) -> int:
    """The `server` field of a signed request's trailer."""
    return int.from_bytes(datagram[-AUTH_TRAILER_SIZE + 4:-AUTH_TRAILER_SIZE + 8], "big")


class FakeServer:
    def __init__(self, script, node: int = 7, key: Key | None = None):
        self.script = script
        self.node = node
        self.key = key
        self.requests: list[tuple[float, dict, int]] = []  # (arrival, fields, size)
        self.datagrams: list[bytes] = []  # every request, as received
        self.peers: list[tuple[str, int]] = []  # every request's source address
        self.bad_macs = 0  # signed requests dropped (key set): the MAC did not verify
        self.wrong_servers = 0  # signed requests answered wrong_server (key set)
        self.next_id = BASE_ID
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self._socket.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            readable, _, _ = select.select([self._socket], [], [], 0.02)
            if not readable:
                continue
            datagram, peer = self._socket.recvfrom(2048)
            fields = read_request_fields(datagram)
            self.requests.append((time.monotonic(), fields, len(datagram)))
            self.datagrams.append(datagram)
            self.peers.append(peer)
            signed = self.key is not None and fields["flags"] & FLAG_AUTH
            if signed and not verifies(datagram, self.key):
                self.bad_macs += 1
                continue
            issues = fields["opcode"] in (Opcode.GET_IDS, Opcode.GET_SEQ)
            if signed and issues and trailer_server(datagram) != self.node:
                self.wrong_servers += 1
                answers = [self.answer(fields, Status.UNAUTHORIZED, RequestError.WRONG_SERVER)]
            else:
                answers = self.script(self, fields, datagram)
            for answer in answers:
                if signed and not isinstance(answer, Unsigned):
                    answer = sign_answer(answer, request_mac(datagram), self.key)
                self._socket.sendto(answer, peer)

    # ---- answers a script composes ----

    def answer(self, fields: dict, status: int = Status.OK, detail: int = 0,
               request_id: int | None = None, ranges=(), info=None, opcode=None) -> bytes:
        rid = fields["request_id"] if request_id is None else request_id
        return encode_response(Response(fields["opcode"] if opcode is None else opcode, status,
                                        len(ranges), self.node, rid, detail, list(ranges), info))

    def issue(self, fields: dict, size: int, request_id: int | None = None) -> bytes:
        """An OK GET_IDS answer: as many ranges as the request's size buys, PER_RANGE each."""
        ranges = []
        left = fields["count"]
        while left and len(ranges) < ranges_max(size):
            count = min(left, PER_RANGE)
            ranges.append((self.next_id, count))
            self.next_id += 1 << 22  # next time unit: ranges never touch
            left -= count
        return self.answer(fields, ranges=ranges, request_id=request_id)


def serve_ok(server: FakeServer, fields: dict, datagram: bytes) -> list[bytes]:
    """A well-behaved server: GET_IDS issued, PING answered, INFO the snowflake layout."""
    if fields["opcode"] == Opcode.GET_IDS:
        return [server.issue(fields, len(datagram))]
    if fields["opcode"] == Opcode.INFO:
        return [server.answer(fields, info=Info(1704067200000, 1, 41, 10, 12, 0, 0, 1))]
    return [server.answer(fields)]


def silent(server: FakeServer, fields: dict, datagram: bytes) -> list[bytes]:
    return []


class Monotonic:
    """A script: one node of a cluster serving the monotonic sequence `name`. While `owner`
    (set at run time) is the server's node it issues 1, 2, 3, ... in order, one range an
    answer; otherwise it answers NOT_OWNER naming `owner` (NOT_OWNER_UNKNOWN: none known).
    With `serve_if_mine` False it answers NOT_OWNER naming `owner` even when that is itself (a
    restarted owner whose old owner key has not expired yet). With `fenced` it answers FENCED
    to every GET_SEQ (a server that lost its node id; its header still names it). Other names
    get UNKNOWN_SEQUENCE, other opcodes serve_ok's answers. Attributes may change at run time."""

    def __init__(self, owner: int, name: bytes = b"ledger", fenced: bool = False,
                 serve_if_mine: bool = True):
        self.owner = owner
        self.name = name
        self.fenced = fenced
        self.serve_if_mine = serve_if_mine
        self.next = 1
        self.not_owner_answers = 0
        self.fenced_answers = 0

    def __call__(self, server: FakeServer, fields: dict, datagram: bytes) -> list[bytes]:
        if fields["opcode"] != Opcode.GET_SEQ:
            return serve_ok(server, fields, datagram)
        size = datagram[REQUEST_HEADER_SIZE]
        if datagram[REQUEST_HEADER_SIZE + 1:REQUEST_HEADER_SIZE + 1 + size] != self.name:
            return [server.answer(fields, Status.UNKNOWN_SEQUENCE)]
        if self.fenced:
            self.fenced_answers += 1
            return [server.answer(fields, Status.FENCED)]
        if self.owner != server.node or not self.serve_if_mine:
            self.not_owner_answers += 1
            return [server.answer(fields, Status.NOT_OWNER, self.owner)]
        first, self.next = self.next, self.next + fields["count"]
        return [server.answer(fields, ranges=[(first, fields["count"])])]
