"""The I/O-free core shared by Client and AsyncClient: one exchange (failover, per-attempt
timeout, RETRY back-off, FENCED -> next server, answer validation) and fetch(n), written as
generators that yield what they need done and get its result sent back:

  Send(server, datagram)     -> 0, or the errno of a send that failed at once
  Receive(server, deadline)  -> one datagram from that server, or None once
                                time.monotonic() >= deadline
  Sleep(seconds)             -> None

A driver (client.py: one connected socket per server and select; aio.py: one connected asyncio
DatagramProtocol per server) performs each action and raises ShuttingDownError from it when
the client is closed. So both clients behave the same by construction, exactly as the C++
client/exchange.cc does.

Contract:
  * Every datagram sent carries a fresh, unpredictable request id (RequestIds: the operating
    system's CSPRNG, os.urandom), and goes out on the socket connected to its server; an
    answer is read only from that socket, so only from the server asked (PROTOCOL.md "What a
    client can be sure of"). An answer is accepted only if it passes decode_response
    (PROTOCOL.md rules 1-12), echoes the outstanding request id (rule 13) and is consistent
    with the request (rules 14-15); anything else is counted (ignored_responses,
    malformed_responses) and dropped, and the wait goes on.
  * RETRY sleeps the hint clamped to RETRY_WAIT_MIN_S..retry_wait_max_ms and asks the same
    server again without using an attempt, until retry_budget_ms of sleeping would be
    exceeded (RetryExhaustedError). A timeout, a failed send and FENCED use an attempt and move
    to the next server; when the attempts run out and every FENCED answer said draining
    (detail 1), the error is DrainingError, else FencedError. BAD_REQUEST and UNAUTHORIZED end
    the exchange, but for a signed UNAUTHORIZED wrong_server (below). EXHAUSTED ends it at once
    (ExhaustedError): no server can ever issue those IDs again.
  * NOT_OWNER (GET_SEQ of a monotonic sequence another node serves) uses an attempt and asks
    the server last heard answering as the node it names (every accepted answer's header names
    its node; FENCED answers do not count), else the next server, whose answer teaches its
    node; when every server answered during this exchange and none is the owner (or the
    attempts run out) the exchange fails NotOwnerError. With no owner known (or a server
    naming itself: a move under way) it sleeps OWNER_MOVE_WAIT_S, within retry_budget_ms (the
    budget RETRY uses), and asks the next server without using an attempt. UNKNOWN_SEQUENCE
    ends the exchange.
  * With Options.key every attempt is signed anew (a fresh timestamp from the wall clock, so a
    new MAC: a server drops a retransmitted copy as a replay), in a request 3 bytes longer than
    the unsigned one (3x of them pays for the 8-byte answer MAC) and at least 44 bytes, for
    the node id the server last answered as (ANY_SERVER until it has). Before anything else,
    an answer must be at least 28 bytes and its MAC must verify for this attempt's request
    MAC; otherwise it is counted (unverified_responses) and the wait goes on; then answer[:-8]
    is checked as above. A signed UNAUTHORIZED wrong_server names the server's node id in its
    header: the request is signed again for it and sent to the same server at once, without
    using an attempt (twice at most in a row). An unsigned UNAUTHORIZED for the request id
    cannot be trusted, so it is only remembered to name it if the attempts run out; any other
    signed one (not_permitted, stale_timestamp) ends the exchange, and a signed RETRY
    (rate_limited) is a RETRY. A server drops signed requests whose key id it does not know or
    whose MAC does not verify: the NoAnswerError then says so.
  * Not thread-safe: the caller serializes exchanges (one request outstanding).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Generator, NamedTuple, TypeVar

from . import auth
from . import options as opt
from .wire import (ANY_SERVER, DATAGRAM_SIZE_MAX, FENCED_DRAINING, NOT_OWNER_UNKNOWN,
                   REQUEST_HEADER_SIZE, SIGNED_REQUEST_SIZE_MIN, Opcode, Request, RequestError,
                   Response, ResponseError, Status, consistent, decode_response,
                   encode_request, request_error_name, request_size_for_ids)


class Send(NamedTuple):
    server: int
    datagram: bytes


class Receive(NamedTuple):
    server: int  # read only what this server's socket received
    deadline: float


class Sleep(NamedTuple):
    seconds: float


Action = Send | Receive | Sleep
T = TypeVar("T")
Steps = Generator[Action, object, T]


@dataclass
class Answer:
    response: Response
    server: int  # index into Options.servers
    rtt_s: float


@dataclass
class _Failure:
    kind: str  # "timeout", "fenced", "draining", "send_failed" or "not_owner"
    server: int
    err: int = 0  # send_failed: the errno
    owner: int = NOT_OWNER_UNKNOWN  # not_owner: the node it named


def drive(steps: Steps[T], perform: Callable[[Action], object]) -> T:
    """Runs an exchange generator to its end with a blocking `perform`."""
    try:
        action = next(steps)
        while True:
            action = steps.send(perform(action))
    except StopIteration as stop:
        result: T = stop.value
        return result


RETRY_WAIT_MIN_US = round(opt.RETRY_WAIT_MIN_S * 1e6)
OWNER_MOVE_WAIT_US = round(opt.OWNER_MOVE_WAIT_S * 1e6)
# wrong_server answers in a row after which the request is refused as any UNAUTHORIZED.
RESIGNS_MAX = 2


class RequestIds:
    """Unpredictable 64-bit request ids from the operating system's CSPRNG (os.urandom),
    fetched IDS_PER_FETCH at a time so that a request costs no system call. No counter: one
    request id tells nothing about the next (PROTOCOL.md "Request"). Not thread-safe: the
    exchange's caller serializes it."""

    IDS_PER_FETCH = 64

    def __init__(self) -> None:
        self._ids: list[int] = []

    def next(self) -> int:
        if not self._ids:
            block = os.urandom(8 * self.IDS_PER_FETCH)
            self._ids = [int.from_bytes(block[i:i + 8], "big") for i in range(0, len(block), 8)]
        return self._ids.pop()


def _times(n: int) -> str:
    return " once" if n == 1 else f" {n} times"


class Exchange:
    def __init__(self, options: opt.Options):
        self.options = options
        self.counters = opt.Counters()
        # The server asked first; moves on timeout, failed send, FENCED, NOT_OWNER.
        self.current = 0
        # The node each server last answered as (its header's node); None until it answers.
        self.server_node: list[int | None] = [None] * len(options.servers)
        # Which servers answered during the current exchange.
        self._heard = [False] * len(options.servers)
        self._request_ids = RequestIds()
        # wrong_server answers in a row (a signed client learning a server's node id).
        self._resigned = 0
        # The detail of an unsigned UNAUTHORIZED seen in this exchange (0: none); see
        # _unverified.
        self._unsigned_refusal = 0

    def run(self, opcode: Opcode, count: int = 0, padded_size: int = REQUEST_HEADER_SIZE,
            name: bytes = b"") -> Steps[Answer]:
        """One exchange (`name`: GET_SEQ's sequence); returns the accepted OK answer or raises
        a FlurryError."""
        failures: list[_Failure] = []
        self._unsigned_refusal = 0
        self._heard = [False] * len(self.options.servers)
        retry_waited_us = 0  # whole microseconds: sums of float seconds drift off the budget
        attempt = 0
        while attempt < self.options.attempts:
            server = self.current
            next_server = (server + 1) % len(self.options.servers)
            request = Request(opcode, count, self._request_ids.next(), name=name)
            datagram = self._encode(request, server, padded_size)
            self.counters.requests += 1
            sent = time.monotonic()
            err = yield Send(server, datagram)
            if err:
                assert isinstance(err, int)
                self.counters.send_errors += 1
                failures.append(_Failure("send_failed", server, err))
                yield Sleep(opt.SEND_FAILURE_PAUSE_S)
            else:
                response = yield from self._await(request, server, auth.request_mac(datagram),
                                                  sent + self.options.timeout_ms / 1000)
                if response is None:
                    self.counters.timeouts += 1
                    failures.append(_Failure("timeout", server))
                else:
                    self.counters.responses += 1
                    self._note_node(response, server)
                    if self._resign(response):
                        continue  # the same server, signed for its node: not an attempt
                    if response.status == Status.OK:
                        return Answer(response, server, time.monotonic() - sent)
                    if response.status == Status.RETRY:
                        retry_waited_us = yield from self._on_retry(response, server,
                                                                    retry_waited_us)
                        continue  # same server; the attempt is not used up
                    if response.status == Status.FENCED:
                        self.counters.fenced += 1
                        draining = response.detail == FENCED_DRAINING
                        failures.append(_Failure("draining" if draining else "fenced", server))
                    elif response.status == Status.NOT_OWNER:
                        failures.append(_Failure("not_owner", server, owner=response.detail))
                        if self._owner_moving(response, retry_waited_us):
                            yield Sleep(OWNER_MOVE_WAIT_US / 1e6)
                            retry_waited_us += OWNER_MOVE_WAIT_US
                            self.current = next_server
                            continue  # the next server; the attempt is not used up
                        next_server = self._on_not_owner(response, server, name)
                    else:
                        raise self._rejected(response, server, opcode, name)
            self.current = next_server
            attempt += 1
        raise self._attempts_failed(failures)

    def fetch(self, n: int, name: bytes = b"") -> Steps[list[tuple[int, int]]]:
        """Ranges (first, count) holding exactly n IDs (numbers of the sequence `name` when
        it is given), asking again after partial answers."""
        opcode = Opcode.GET_SEQ if name else Opcode.GET_IDS
        ranges: list[tuple[int, int]] = []
        remaining = n
        while remaining > 0:
            count = min(remaining, self.options.ids_per_request)
            padded_size = request_size_for_ids(count, opt.IDS_PER_RANGE_ASSUMED)
            answer = yield from self.run(opcode, count, padded_size, name)
            ids = answer.response.id_count()
            ranges.extend(answer.response.ranges)
            self.counters.ids_received += ids
            remaining -= ids  # consistent() guarantees ids <= count <= remaining
        return ranges

    def _encode(self, request: Request, server: int, padded_size: int) -> bytes:
        """Unsigned: the padded request. Signed: as the C++ client's Exchange::encode, for the
        node id `server` last answered as (ANY_SERVER until it has: PING and INFO are served,
        GET_IDS and GET_SEQ answered wrong_server naming it), stamped with the wall clock now
        (microseconds since the Unix epoch)."""
        key = self.options.key
        if key is None:
            return encode_request(request, padded_size)
        size = min(max(padded_size + 3, SIGNED_REQUEST_SIZE_MIN), DATAGRAM_SIZE_MAX)
        node = self.server_node[server]
        return auth.sign_request(request, size, key, ANY_SERVER if node is None else node,
                                 time.time_ns() // 1000)

    def _resign(self, response: Response) -> bool:
        """True when a verified wrong_server answer is to be followed by the same request
        signed for the node it named (recorded by _note_node), at most RESIGNS_MAX times in a
        row; a server that keeps naming another node is then refused as any UNAUTHORIZED."""
        wrong_server = (response.status == Status.UNAUTHORIZED
                        and response.detail == RequestError.WRONG_SERVER)
        if not wrong_server:
            self._resigned = 0
            return False
        if self.options.key is None or self._resigned >= RESIGNS_MAX:
            return False
        self._resigned += 1
        return True

    def _await(self, request: Request, server: int, request_mac: bytes,
               deadline: float) -> Steps[Response | None]:
        while True:
            datagram = yield Receive(server, deadline)
            if datagram is None:
                return None
            assert isinstance(datagram, bytes)
            response = self.accept(datagram, request, request_mac)
            if response is not None:
                return response

    def accept(self, datagram: bytes, request: Request,
               request_mac: bytes = b"") -> Response | None:
        """Classifies one received datagram; the Response if it answers `request`. With
        Options.key, `request_mac` is the MAC of the request as sent."""
        key = self.options.key
        if key is not None:
            if not auth.verify_answer(datagram, request_mac, key):
                self._unverified(datagram, request)
                return None
            datagram = datagram[:-auth.ANSWER_MAC_SIZE]
        error, response = decode_response(datagram)
        if error != ResponseError.OK or response is None:
            self.counters.malformed_responses += 1
            return None
        if response.request_id != request.request_id:
            self.counters.ignored_responses += 1  # late answer to an earlier attempt, or foreign
            return None
        if not consistent(response, request):
            self.counters.malformed_responses += 1
            return None
        return response

    def _unverified(self, datagram: bytes, request: Request) -> None:
        self.counters.unverified_responses += 1
        # Remembered for the error message only: anyone on the path could have sent it.
        _, response = decode_response(datagram)
        if (response is not None and response.request_id == request.request_id
                and response.status == Status.UNAUTHORIZED):
            self._unsigned_refusal = response.detail

    def _on_retry(self, response: Response, server: int, retry_waited_us: int) -> Steps[int]:
        self.counters.retries += 1
        wait_us = min(max(response.detail, RETRY_WAIT_MIN_US),
                      self.options.retry_wait_max_ms * 1000)
        if retry_waited_us + wait_us > self.options.retry_budget_ms * 1000:
            raise opt.RetryExhaustedError(
                f"{self.options.servers[server]} kept answering RETRY for "
                f"{retry_waited_us / 1000:.0f} ms (budget {self.options.retry_budget_ms} ms): "
                "its issue ceiling is not rising; is its watermark store or etcd stalled?")
        yield Sleep(wait_us / 1e6)
        return retry_waited_us + wait_us

    def _note_node(self, response: Response, server: int) -> None:
        """Records the node a server answered as. A FENCED server still names the node id it
        lost, which may be another server's now: it serves as no node, and is not heard as one.
        A node id answered by one server is no longer another's (node ids move between
        processes after a fence)."""
        if response.status == Status.FENCED:
            self.server_node[server] = None
            return
        self._heard[server] = True
        for index, node in enumerate(self.server_node):
            if node == response.node:
                self.server_node[index] = None
        self.server_node[server] = response.node

    def _owner_moving(self, response: Response, retry_waited_us: int) -> bool:
        """NOT_OWNER with no owner known, or naming the answering server's own node (its old
        owner key lives until its old lease ends), is a move under way: True when a wait for
        it still fits the retry budget."""
        owner = response.detail
        return ((owner == NOT_OWNER_UNKNOWN or owner == response.node)
                and retry_waited_us + OWNER_MOVE_WAIT_US <= self.options.retry_budget_ms * 1000)

    def _on_not_owner(self, response: Response, server: int, name: bytes) -> int:
        """NOT_OWNER: the server to ask next. The one last heard answering as the owner it
        names, else the next one (an unheard server may be the named one, or the wait for a
        move ran out of budget); NotOwnerError when every server answered during this
        exchange and none is the owner."""
        owner = response.detail
        if owner != NOT_OWNER_UNKNOWN and owner != response.node:
            for index, node in enumerate(self.server_node):
                if node == owner and index != server:
                    return index
            # Given up only on what this exchange heard: an earlier one's record may be stale.
            if all(self._heard):
                raise opt.NotOwnerError(
                    f"{self.options.servers[server]} does not serve the monotonic sequence "
                    f"'{name.decode()}': node {owner} does, and none of this client's servers "
                    "answers as that node (add it to the server list)")
        return (server + 1) % len(self.options.servers)

    def _rejected(self, response: Response, server: int, opcode: Opcode,
                  name: bytes) -> opt.FlurryError:
        """BAD_REQUEST, UNAUTHORIZED, UNKNOWN_SEQUENCE or EXHAUSTED: another server would
        answer the same."""
        if response.status == Status.EXHAUSTED:
            what = (f": the sequence '{name.decode()}' has reached 2^63 and can issue no number "
                    "again" if opcode == Opcode.GET_SEQ else
                    ": the ID layout's time field has run out (its last instant has passed): no "
                    "server of this layout can issue IDs again; a new layout or epoch is needed")
            return opt.ExhaustedError(f"{self.options.servers[server]} answered EXHAUSTED to "
                                      f"{opcode.name}{what}")
        if response.status == Status.UNKNOWN_SEQUENCE:
            return opt.UnknownSequenceError(
                f"{self.options.servers[server]} has no sequence '{name.decode()}' "
                f"(flurryctl seq create {name.decode()})")
        bad = response.status == Status.BAD_REQUEST
        text = (f"{self.options.servers[server]} answered {Status(response.status).name} "
                f"({request_error_name(response.detail)}) to {opcode.name}: ")
        if bad:
            return opt.BadRequestError(text + "the server rejects this request; is the client "
                                       "built for another wire version?")
        if self.options.key is None:
            return opt.UnauthorizedError(text + "this server requires authentication; give the "
                                         "client a key (Options.key, read_key_file)")
        # The answer verified: the server knows the key, and its reason can be trusted.
        if response.detail == RequestError.STALE_TIMESTAMP:
            return opt.UnauthorizedError(
                text + "this client's clock is further from the server's than its window "
                "allows, or the server started (or took its node id) after the request was "
                "signed: check both clocks (NTP)")
        if response.detail == RequestError.WRONG_SERVER:
            return opt.UnauthorizedError(text + "the server kept naming another node id than "
                                         "the one the request was signed for")
        return opt.UnauthorizedError(text + "the key is not allowed this request (see "
                                     "flurryctl keys list)")

    def _attempts_failed(self, failures: list[_Failure]) -> opt.FlurryError:
        """The attempts ran out: name every server that failed, in order of first failure."""
        attempts = self.options.attempts
        attempts_text = f"{attempts} attempt" + ("" if attempts == 1 else "s")
        order = list(dict.fromkeys(f.server for f in failures))
        if self._unsigned_refusal:  # after an unverifiable refusal: name it
            return opt.UnauthorizedError(
                f"no verifiable answer after {attempts_text}; an unsigned UNAUTHORIZED "
                f"({request_error_name(self._unsigned_refusal)}) came back, which a signed "
                "client cannot trust: check the key id, secret and clock")
        if all(f.kind == "timeout" for f in failures):
            names = ", ".join(self.options.servers[s] for s in order)
            # A signed request naming a key the server lacks, or with a wrong secret, is
            # dropped unanswered (PROTOCOL.md: no oracle): from here that looks like silence.
            why = (" (a server drops signed requests whose key id it does not know or whose MAC "
                   "does not verify: check the key id and secret, flurryctl keys list)"
                   if self.options.key is not None else "")
            return opt.NoAnswerError(f"no answer from {names} after {attempts_text} of "
                                     f"{self.options.timeout_ms} ms{why}")
        text = f"no server could serve the request after {attempts_text}: " + "; ".join(
            self._describe(server, failures) for server in order)
        # NOT_OWNER says most: the sequence is served, just not by the servers that answered.
        if any(f.kind == "not_owner" for f in failures):
            return opt.NotOwnerError(text)
        if any(f.kind == "fenced" for f in failures):
            return opt.FencedError(text)
        if any(f.kind == "draining" for f in failures):
            return opt.DrainingError(text)
        return opt.NoAnswerError(text)

    def _describe(self, server: int, failures: list[_Failure]) -> str:
        """e.g. "10.0.0.1:7420 answered FENCED once (it holds no node id: lost, or not yet
        claimed), gave no answer within 100 ms 2 times"."""
        mine = [f for f in failures if f.server == server]
        parts = []
        fenced = sum(f.kind == "fenced" for f in mine)
        if fenced:
            parts.append(f"answered FENCED{_times(fenced)} (it holds no node id: lost, or not "
                         "yet claimed)")
        draining = sum(f.kind == "draining" for f in mine)
        if draining:
            parts.append(f"answered FENCED{_times(draining)} (draining: its operator is "
                         "stopping it)")
        not_owner = [f for f in mine if f.kind == "not_owner"]
        if not_owner:
            owner = not_owner[-1].owner
            whose = "no owner known" if owner == NOT_OWNER_UNKNOWN else f"node {owner} serves it"
            parts.append(f"answered NOT_OWNER{_times(len(not_owner))} ({whose})")
        timeouts = sum(f.kind == "timeout" for f in mine)
        if timeouts:
            parts.append(f"gave no answer within {self.options.timeout_ms} ms{_times(timeouts)}")
        sends = [f for f in mine if f.kind == "send_failed"]
        if sends:
            parts.append(f"could not be sent to ({os.strerror(sends[-1].err)}){_times(len(sends))}")
        return self.options.servers[server] + " " + ", ".join(parts)
