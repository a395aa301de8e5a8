"""The blocking flurry client: one UDP socket per server, connected to it, one request
outstanding, an optional prefetch buffer refilled by a background thread. Mirrors the C++
flurry::client::Client (client.h).

Contract:
  * Every call may come from any thread. Exchanges are serialized on the sockets by an
    internal lock, so concurrent get()/ping()/info() queue behind each other (and behind the
    refill). With prefetch on, next() usually pops from the buffer without a round trip.
  * get(n) returns exactly n unique IDs in the order the server issued them, or raises and
    returns nothing (IDs already received are dropped, never reused).
  * An answer is read only from the socket connected to the server asked: the kernel drops
    datagrams from any other address and port.
  * close() stops the refill thread, interrupting any exchange it has in flight, and closes
    the sockets; a call in flight or after it raises ShuttingDownError.
  * get_seq(name, n) asks GET_SEQ for numbers of a named sequence; a monotonic one in
    cluster mode is served by one node, and a NOT_OWNER answer sends the request to the server
    of the list last heard answering as the node it names (else the next server).
  * Errors (all FlurryError): InvalidArgumentError, ResolveFailedError, SystemCallError (at
    construction); NoAnswerError, FencedError, RetryExhaustedError, BadRequestError,
    DrainingError, UnauthorizedError, ExhaustedError, ShuttingDownError (per call);
    UnknownSequenceError, NotOwnerError (get_seq); BadLayoutError (layout(), decode()).
"""

from __future__ import annotations

import errno
import os
import select
import socket
import threading
import time
from typing import Any

from . import options as opt
from .exchange import Action, Exchange, Receive, Send, Sleep, Steps, T, drive
from .layout import Decoded, Layout
from .prefetch import PrefetchBuffer, expand
from .wire import DATAGRAM_SIZE_MAX, Info, Opcode


def checked_layout(info: Info) -> Layout:
    """The layout INFO describes, refused (BadLayoutError) when it fails the layout rules."""
    layout = Layout.from_info(info)
    problem = layout.validate()
    if problem is not None:
        raise opt.BadLayoutError(f"the server reported an unusable layout: {problem}")
    return layout


def decode_with(layout: Layout, id_: int) -> Decoded:
    if not layout.fits(id_):
        raise opt.BadLayoutError(f"ID {id_} has bits above the server's layout; is it from "
                                 "another layout?")
    return layout.decode(id_)


def open_sockets(options: opt.Options,
                 addresses: list[tuple[str, int]]) -> list[socket.socket]:
    """One non-blocking UDP socket per server, connected to it (the kernel then delivers only
    that server's datagrams to it). Sends nothing. SystemCallError when one cannot be opened;
    those already open are closed."""
    sockets: list[socket.socket] = []
    try:
        for text, address in zip(options.servers, addresses):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sockets.append(sock)
            sock.setblocking(False)
            try:
                sock.connect(address)
            except OSError as error:
                raise opt.SystemCallError(f"cannot connect a UDP socket to server {text!r}: "
                                          f"{error.strerror}") from error
    except OSError as error:
        for sock in sockets:
            sock.close()
        raise opt.SystemCallError(f"cannot open a UDP socket: {error.strerror}") from error
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Client:
    def __init__(self, options: opt.Options | None = None, **overrides: Any):
        """Checks the options, resolves every server, opens one socket per server and, with
        prefetch on, starts the refill thread. Sends nothing otherwise. Keyword arguments
        override fields of `options`, e.g. Client(servers=["10.0.0.1:7420"], prefetch=10_000).
        Errors: InvalidArgumentError, ResolveFailedError, SystemCallError."""
        self.options = opt.Options(**{**(vars(options) if options else {}), **overrides})
        opt.check_options(self.options)
        addresses = opt.resolve_servers(self.options.servers)
        self._exchange = Exchange(self.options)
        self._io_lock = threading.Lock()
        self._closed = threading.Event()
        self._layout: Layout | None = None
        self._sockets = open_sockets(self.options, addresses)
        try:
            self._wake_read, self._wake_write = os.pipe()
        except OSError as error:
            for sock in self._sockets:
                sock.close()
            raise opt.SystemCallError(f"cannot open a pipe: {error.strerror}") from error
        self._prefetch: PrefetchBuffer | None = None
        self._refill_wanted = threading.Event()
        self._thread: threading.Thread | None = None
        if self.options.prefetch:
            self._prefetch = PrefetchBuffer(self.options, self._exchange.counters)
            self._refill_wanted.set()
            self._thread = threading.Thread(target=self._refill_loop, name="flurry-prefetch",
                                            daemon=True)
            self._thread.start()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops and joins the refill thread (interrupting its exchange), closes the sockets."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._refill_wanted.set()
        os.write(self._wake_write, b"\0")
        if self._thread is not None:
            self._thread.join()
        with self._io_lock:
            for sock in self._sockets:
                sock.close()
            os.close(self._wake_read)
            os.close(self._wake_write)

    # ---- the API ----

    def get(self, n: int) -> list[int]:
        """Exactly n unique IDs, asking as many times as needed; n == 0 returns []."""
        return expand(self.get_ranges(n))

    def get_ranges(self, n: int) -> list[tuple[int, int]]:
        """As get(), as ranges (first, count) whose counts sum to exactly n."""
        opt.check_get_count(n)
        return self._run(self._exchange.fetch(n))

    def get_seq(self, name: str, n: int) -> list[int]:
        """Exactly n numbers of the named sequence (GET_SEQ), in the order issued; n == 0
        returns []. Unique for the sequence; in monotonic mode increasing. No prefetch.
        Errors: those of get(), InvalidArgumentError (a bad name), UnknownSequenceError,
        NotOwnerError (no server of the list serves this monotonic sequence)."""
        return expand(self.get_seq_ranges(name, n))

    def get_seq_ranges(self, name: str, n: int) -> list[tuple[int, int]]:
        """As get_seq(), as ranges (first, count) whose counts sum to exactly n."""
        encoded = opt.check_seq_name(name)
        opt.check_get_count(n, "numbers in one get_seq")
        return self._run(self._exchange.fetch(n, encoded))

    def next(self) -> int:
        """One ID: from the prefetch buffer when it is on (fetching synchronously when it is
        empty), else one request."""
        buffer = self._prefetch
        if buffer is None:
            return self.get_ranges(1)[0][0]
        id_ = buffer.pop()
        if id_ is None:
            with self._io_lock:  # waits out a refill in flight, then looks again
                id_ = buffer.pop()
                if id_ is None:
                    ranges = self._run_locked(self._exchange.fetch(buffer.sync_want()))
                    id_ = buffer.push_but_first(ranges)
        if buffer.wants_refill():
            self._refill_wanted.set()
        return id_

    def ping(self) -> opt.PingResult:
        """Round-trip time of one PING, with the same attempts and failover as get()."""
        answer = self._run(self._exchange.run(Opcode.PING))
        return opt.PingResult(answer.rtt_s, self.options.servers[answer.server],
                              answer.response.node)

    def info(self) -> Info:
        """The server's layout as INFO reports it (unchecked; see layout())."""
        info = self._run(self._exchange.run(Opcode.INFO)).response.info
        assert info is not None  # decode_response: an OK INFO answer carries its body
        return info

    def layout(self) -> Layout:
        """The server's layout from INFO (asked once, then cached), checked."""
        if self._layout is None:
            self._layout = checked_layout(self.info())
        return self._layout

    def decode(self, id_: int) -> Decoded:
        """Time, node, core and counter of an ID, with the layout the server reports."""
        return decode_with(self.layout(), id_)

    def counters(self) -> opt.Counters:
        return self._exchange.counters.copy()

    # ---- driving an exchange over the sockets ----

    def _run(self, steps: Steps[T]) -> T:
        with self._io_lock:
            return self._run_locked(steps)

    def _run_locked(self, steps: Steps[T]) -> T:
        if self._closed.is_set():
            raise opt.ShuttingDownError("the client is closed")
        return drive(steps, self._perform)

    def _perform(self, action: Action) -> object:
        if isinstance(action, Send):
            try:
                self._sockets[action.server].send(action.datagram)
                return 0
            except OSError as error:
                return error.errno or errno.EIO
        if isinstance(action, Receive):
            return self._receive(self._sockets[action.server], action.deadline)
        assert isinstance(action, Sleep)
        if self._closed.wait(action.seconds):
            raise opt.ShuttingDownError("the client was closed during the call")
        return None

    def _receive(self, sock: socket.socket, deadline: float) -> bytes | None:
        """One datagram from `sock` (connected to the server asked), or None once the deadline
        has passed (after a last look). With poll_us, the caller's thread looks again without
        sleeping until that much has passed, then blocks in select."""
        poll_until = 0.0
        if self.options.poll_us and threading.current_thread() is not self._thread:
            poll_until = time.monotonic() + self.options.poll_us * 1e-6
        while True:
            try:
                return sock.recv(DATAGRAM_SIZE_MAX + 1)  # one more: oversize is seen
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                continue  # a pending ICMP error (ECONNREFUSED): cleared by reporting it
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                return None
            if now < poll_until:
                if self._closed.is_set():
                    raise opt.ShuttingDownError("the client was closed during the call")
                continue
            readable, _, _ = select.select([sock, self._wake_read], [], [], left)
            if self._wake_read in readable:
                raise opt.ShuttingDownError("the client was closed during the call")

    # ---- the refill thread ----

    def _refill_loop(self) -> None:
        buffer = self._prefetch
        assert buffer is not None  # the thread runs only with prefetch on
        while True:
            self._refill_wanted.wait()
            self._refill_wanted.clear()
            if self._closed.is_set():
                return
            ok = self._refill(buffer)
            if not ok and self._closed.wait(opt.REFILL_BACKOFF_S):
                return

    def _refill(self, buffer: PrefetchBuffer) -> bool:
        added = False
        while not self._closed.is_set():
            with self._io_lock:
                want = buffer.refill_want()
                if want == 0:
                    break
                try:
                    buffer.push(self._run_locked(self._exchange.fetch(want)))
                except opt.FlurryError:
                    buffer.refill_done(added, failed=not self._closed.is_set())
                    return False
            added = True
        buffer.refill_done(added, failed=False)
        return True
