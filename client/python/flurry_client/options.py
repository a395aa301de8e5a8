"""Options, errors and counters shared by Client and AsyncClient; the same bounds, error codes
and counters as the C++ client (client/client.h).

Contract: check_options() raises InvalidArgumentError naming the option and its range, so a
client is never built from options out of bounds (CONTRIBUTING.md, bounds: every number has a default, a
minimum and a maximum). Every error the clients raise is a FlurryError with a `code` and one
sentence for a person.
"""

from __future__ import annotations

import enum
import socket
from dataclasses import dataclass, field, fields

from .auth import KEY_ID_MAX, SECRET_SIZE, Key
from .wire import COUNT_MAX, SEQ_NAME_BYTES, SEQ_NAME_SIZE_MAX

DEFAULT_SERVER = "127.0.0.1:7420"
SERVERS_MAX = 64
TIMEOUT_MS_MIN, TIMEOUT_MS_MAX = 1, 60_000
ATTEMPTS_MAX = 100
PREFETCH_MIN, PREFETCH_MAX = 2, 1 << 24
RETRY_WAIT_MAX_MS_MAX = 10_000
RETRY_BUDGET_MS_MAX = 600_000
POLL_US_MAX = 10_000  # the C++ client's poll_max
GET_COUNT_MAX = 1 << 26  # the largest n one get() accepts
RETRY_WAIT_MIN_S = 50e-6  # a RETRY hint of 0 must not turn into a busy loop
# NOT_OWNER with no owner known: a sequence's owner is settled within a second or so (the
# servers' sync period), so ask again after this, within retry_budget_ms (the C++
# client's owner_move_wait).
OWNER_MOVE_WAIT_S = 0.050
SEND_FAILURE_PAUSE_S = 0.001  # after a send that fails at once, so attempts are not spun through
REFILL_BACKOFF_S = 0.25  # the prefetch refill waits this long after a failed refill
# A conservative guess of IDs per range (a 12-bit sequence shared by 16 workers). It only sizes
# the request padding; a server with smaller slices answers partially and the client asks again.
IDS_PER_RANGE_ASSUMED = 256


@dataclass
class Options:
    # "HOST:PORT" each, IPv4 address or name (resolved once). Tried in order; the client stays
    # on a server until it times out or answers FENCED (or NOT_OWNER, GET_SEQ: see
    # exchange.py). 1..SERVERS_MAX entries.
    servers: list[str] = field(default_factory=lambda: [DEFAULT_SERVER])
    # How long one attempt waits for its answer. TIMEOUT_MS_MIN..TIMEOUT_MS_MAX.
    timeout_ms: int = 100
    # Attempts per exchange; each timeout, failed send or FENCED moves to the next server
    # (wrapping around). 1..ATTEMPTS_MAX.
    attempts: int = 5
    # The most IDs asked in one request (the request is padded so the answer may carry them).
    # 1..COUNT_MAX.
    ids_per_request: int = 4096
    # 0: off. Else the size of a local buffer refilled in the background when it falls below
    # half. 0 or PREFETCH_MIN..PREFETCH_MAX. IDs left in it at close() are never used.
    prefetch: int = 0
    # The longest single wait after a RETRY, whatever its hint. 1..RETRY_WAIT_MAX_MS_MAX.
    retry_wait_max_ms: int = 100
    # The most time one exchange sleeps on RETRY answers before RetryExhaustedError, and on
    # NOT_OWNER with no owner known (OWNER_MOVE_WAIT_S each) before it uses the attempts.
    # 0..RETRY_BUDGET_MS_MAX.
    retry_budget_ms: int = 2_000
    # 0: off. Else a call waiting for its answer looks for it without sleeping for this many
    # microseconds before it blocks: a thread woken from a blocking wait can cost more than the
    # round trip (15-25 us on some VMs). The caller's thread spins (a core, and the GIL, while it
    # does); the prefetch refill thread never does. Client only: an AsyncClient must not spin
    # its event loop and refuses it. 0..POLL_US_MAX, like the C++ client's Options::poll.
    poll_us: int = 0
    # None: unsigned. Else every request (GET_IDS, GET_SEQ, PING, INFO, the prefetch refill's)
    # is signed with this key, each attempt anew, and only answers whose MAC verifies are
    # accepted (the others are counted in unverified_responses). Unsigned refusals (e.g.
    # unknown_key) cannot be trusted: they are not accepted, but named if the attempts then
    # run out. read_key_file() reads one from a key file.
    key: Key | None = None


class ErrorCode(enum.Enum):
    INVALID_ARGUMENT = "invalid_argument"  # bad Options, malformed HOST:PORT, n too large
    RESOLVE_FAILED = "resolve_failed"  # a server name has no IPv4 address
    SYSTEM = "system"  # socket or thread creation failed
    NO_ANSWER = "no_answer"  # every attempt timed out (or could not be sent)
    FENCED = "fenced"  # attempts ran out and a server answered FENCED holding no node id
    DRAINING = "draining"  # attempts ran out and every FENCED answer said draining
    RETRY_EXHAUSTED = "retry_exhausted"  # RETRY for longer than retry_budget_ms
    BAD_REQUEST = "bad_request"  # the server answered BAD_REQUEST (message names why)
    UNAUTHORIZED = "unauthorized"  # the server answered UNAUTHORIZED
    BAD_LAYOUT = "bad_layout"  # the layout INFO reported fails the layout rules
    SHUTTING_DOWN = "shutting_down"  # the client was closed during the call
    UNKNOWN_SEQUENCE = "unknown_sequence"  # GET_SEQ: no sequence of that name on the server
    NOT_OWNER = "not_owner"  # GET_SEQ: a monotonic sequence no server of the list serves
    EXHAUSTED = "exhausted"  # EXHAUSTED: the layout's time or the sequence's numbers ran out


class FlurryError(Exception):
    """Every error of the client: `code` says which, the message says why in one sentence."""

    code: ErrorCode

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidArgumentError(FlurryError):
    code = ErrorCode.INVALID_ARGUMENT


class ResolveFailedError(FlurryError):
    code = ErrorCode.RESOLVE_FAILED


class SystemCallError(FlurryError):
    code = ErrorCode.SYSTEM


class NoAnswerError(FlurryError):
    code = ErrorCode.NO_ANSWER


class FencedError(FlurryError):
    code = ErrorCode.FENCED


class DrainingError(FlurryError):
    code = ErrorCode.DRAINING


class RetryExhaustedError(FlurryError):
    code = ErrorCode.RETRY_EXHAUSTED


class BadRequestError(FlurryError):
    code = ErrorCode.BAD_REQUEST


class UnauthorizedError(FlurryError):
    code = ErrorCode.UNAUTHORIZED


class BadLayoutError(FlurryError):
    code = ErrorCode.BAD_LAYOUT


class ShuttingDownError(FlurryError):
    code = ErrorCode.SHUTTING_DOWN


class UnknownSequenceError(FlurryError):
    code = ErrorCode.UNKNOWN_SEQUENCE


class NotOwnerError(FlurryError):
    code = ErrorCode.NOT_OWNER


class ExhaustedError(FlurryError):
    code = ErrorCode.EXHAUSTED


@dataclass
class Counters:
    """Per-client counters, monotonic since the client was made (C++ client::Counters)."""

    requests: int = 0  # datagrams sent (every attempt and re-ask)
    responses: int = 0  # answers accepted for the outstanding request
    retries: int = 0  # RETRY answers
    timeouts: int = 0  # attempts that got no accepted answer in time
    fenced: int = 0  # FENCED answers
    ignored_responses: int = 0  # well-formed, but for another request id
    malformed_responses: int = 0  # failed decoding, or inconsistent with the request
    send_errors: int = 0  # sendto() failures (counted as failed attempts)
    unverified_responses: int = 0  # Options.key set: unsigned, or a MAC that does not verify
    ids_received: int = 0  # IDs in accepted OK answers
    prefetch_refills: int = 0  # background refills that added IDs
    prefetch_failures: int = 0  # background refills that failed

    def copy(self) -> Counters:
        return Counters(**{f.name: getattr(self, f.name) for f in fields(self)})


@dataclass(frozen=True)
class PingResult:
    rtt_s: float  # send to receipt of the accepted answer
    server: str  # "HOST:PORT" as given in Options.servers
    node: int  # node id from the answer's header


def _check_range(name: str, value: int, low: int, high: int, unit: str = "") -> None:
    if not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError(f"{name} {value!r}{unit} is out of range {low}..{high}{unit}")


def check_options(options: Options) -> None:
    if not options.servers:
        raise InvalidArgumentError("no server given; pass at least one HOST:PORT")
    if len(options.servers) > SERVERS_MAX:
        raise InvalidArgumentError(
            f"{len(options.servers)} servers given; at most {SERVERS_MAX} are allowed")
    _check_range("timeout_ms", options.timeout_ms, TIMEOUT_MS_MIN, TIMEOUT_MS_MAX, " ms")
    _check_range("attempts", options.attempts, 1, ATTEMPTS_MAX)
    _check_range("ids_per_request", options.ids_per_request, 1, COUNT_MAX)
    if options.prefetch != 0:
        _check_range("prefetch (0 is off)", options.prefetch, PREFETCH_MIN, PREFETCH_MAX)
    _check_range("retry_wait_max_ms", options.retry_wait_max_ms, 1, RETRY_WAIT_MAX_MS_MAX, " ms")
    _check_range("retry_budget_ms", options.retry_budget_ms, 0, RETRY_BUDGET_MS_MAX, " ms")
    _check_range("poll_us", options.poll_us, 0, POLL_US_MAX, " us")
    if options.key is not None:
        key = options.key
        if not isinstance(key, Key):
            raise InvalidArgumentError(f"key must be a flurry_client.Key (or None), not "
                                       f"{type(key).__name__}")
        _check_range("key id", key.id, 0, KEY_ID_MAX)
        if not isinstance(key.secret, bytes) or len(key.secret) != SECRET_SIZE:
            raise InvalidArgumentError(f"key secret must be {SECRET_SIZE} bytes")


def check_get_count(n: int, what: str = "IDs in one get") -> None:
    _check_range(f"n ({what})", n, 0, GET_COUNT_MAX)


def check_seq_name(name: str) -> bytes:
    """A sequence name as GET_SEQ carries it; InvalidArgumentError unless it is 1 to
    SEQ_NAME_SIZE_MAX characters from A-Z a-z 0-9 _ . - :."""
    encoded = name.encode("ascii", "replace") if isinstance(name, str) else b""
    if not 1 <= len(encoded) <= SEQ_NAME_SIZE_MAX or not set(encoded) <= SEQ_NAME_BYTES:
        raise InvalidArgumentError(f"bad sequence name {str(name)[:64]!r}: 1 to "
                                   f"{SEQ_NAME_SIZE_MAX} characters from A-Z a-z 0-9 _ . - :")
    return encoded


def split_server(text: str) -> tuple[str, int]:
    """"HOST:PORT" into its parts; InvalidArgumentError when it is not that."""
    host, colon, port_text = text.rpartition(":")
    if not colon or not host or not port_text:
        raise InvalidArgumentError(f"server {text!r} is not HOST:PORT, e.g. 127.0.0.1:7420")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise InvalidArgumentError(f"server {text!r}: port must be a number 1..65535")
    return host, int(port_text)


def resolve_failed(text: str, host: str, error: OSError | None) -> ResolveFailedError:
    why = error.strerror if error is not None and error.strerror else "no IPv4 address"
    return ResolveFailedError(f"server {text!r}: cannot resolve {host!r} to an IPv4 address: {why}")


def resolve_servers(servers: list[str]) -> list[tuple[str, int]]:
    """Every "HOST:PORT" as an IPv4 socket address, resolved once (blocking getaddrinfo)."""
    addresses = []
    for text in servers:
        host, port = split_server(text)
        try:
            infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
        except OSError as error:
            raise resolve_failed(text, host, error) from error
        if not infos:
            raise resolve_failed(text, host, None)
        address = infos[0][4]
        addresses.append((str(address[0]), int(address[1])))
    return addresses
