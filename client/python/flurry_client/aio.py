"""The asyncio flurry client: the same exchange core as Client (exchange.py) driven over one
asyncio DatagramProtocol per server (its UDP socket connected to that server, so an answer is
read only from the server asked), with an optional prefetch buffer refilled by a background
task.

Contract: as client.py's Client, with coroutines. One request outstanding per AsyncClient
(an asyncio.Lock); many tasks may call it at once. Use it as
    async with await AsyncClient.open(servers=[...]) as client: ids = await client.get(1000)
aclose() cancels the refill task and waits for a call in flight to reach its next step (at
most one attempt's timeout), which raises ShuttingDownError, as does every call after it.
Datagrams that arrive while no exchange waits for them are queued per server (at most
RECEIVE_QUEUE_MAX each; more are dropped, as a full socket buffer would) and judged by the next
exchange that asks that server, like late answers.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import time
from typing import Any, cast

from . import options as opt
from .client import checked_layout, decode_with
from .exchange import Action, Exchange, Receive, Send, Steps, T
from .layout import Decoded, Layout
from .prefetch import PrefetchBuffer, expand
from .wire import Info, Opcode

RECEIVE_QUEUE_MAX = 4096


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A datagram endpoint's transport (asyncio's own class does not derive from
        # DatagramTransport, though it has its methods).
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: object) -> None:
        if self.queue.qsize() < RECEIVE_QUEUE_MAX:
            self.queue.put_nowait(data)

    def error_received(self, exc: Exception) -> None:
        pass  # an ICMP error for an earlier send: the attempt times out and fails over


async def _open_protocols(options: opt.Options,
                          addresses: list[tuple[str, int]]) -> list[_Protocol]:
    """One datagram endpoint per server, its socket connected to it. SystemCallError when one
    cannot be opened; those already open are closed."""
    loop = asyncio.get_running_loop()
    protocols: list[_Protocol] = []
    try:
        for text, address in zip(options.servers, addresses):
            try:
                _, protocol = await loop.create_datagram_endpoint(
                    _Protocol, remote_addr=address, family=socket.AF_INET)
            except OSError as error:
                raise opt.SystemCallError(f"cannot open a UDP socket connected to server "
                                          f"{text!r}: {error.strerror}") from error
            protocols.append(protocol)
    except BaseException:
        for protocol in protocols:
            if protocol.transport is not None:
                protocol.transport.close()
        raise
    return protocols


class AsyncClient:
    def __init__(self, options: opt.Options, protocols: list[_Protocol]):
        """Use AsyncClient.open(); this only assembles the parts."""
        self.options = options
        self._protocols = protocols
        self._exchange = Exchange(options)
        self._io_lock = asyncio.Lock()
        self._closed = False
        self._layout: Layout | None = None
        self._prefetch: PrefetchBuffer | None = None
        self._refill_wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        if options.prefetch:
            self._prefetch = PrefetchBuffer(options, self._exchange.counters)
            self._refill_wanted.set()
            self._task = asyncio.get_running_loop().create_task(self._refill_loop())

    @classmethod
    async def open(cls, options: opt.Options | None = None, **overrides: Any) -> AsyncClient:
        """Checks the options, resolves every server, opens one socket per server and, with
        prefetch on, starts the refill task. Errors: InvalidArgumentError, ResolveFailedError,
        SystemCallError."""
        options = opt.Options(**{**(vars(options) if options else {}), **overrides})
        opt.check_options(options)
        if options.poll_us != 0:
            raise opt.InvalidArgumentError(
                f"poll_us {options.poll_us} us: an AsyncClient never polls (it would spin the "
                "event loop); use 0, or Client for polling")
        loop = asyncio.get_running_loop()
        addresses = await loop.run_in_executor(None, opt.resolve_servers, options.servers)
        return cls(options, await _open_protocols(options, addresses))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        async with self._io_lock:  # a call in flight ends at its next step (see _perform)
            for protocol in self._protocols:
                if protocol.transport is not None:
                    protocol.transport.close()

    # ---- the API (see client.py for each call's contract) ----

    async def get(self, n: int) -> list[int]:
        return expand(await self.get_ranges(n))

    async def get_ranges(self, n: int) -> list[tuple[int, int]]:
        opt.check_get_count(n)
        return await self._run(self._exchange.fetch(n))

    async def get_seq(self, name: str, n: int) -> list[int]:
        return expand(await self.get_seq_ranges(name, n))

    async def get_seq_ranges(self, name: str, n: int) -> list[tuple[int, int]]:
        encoded = opt.check_seq_name(name)
        opt.check_get_count(n, "numbers in one get_seq")
        return await self._run(self._exchange.fetch(n, encoded))

    async def next(self) -> int:
        buffer = self._prefetch
        if buffer is None:
            return (await self.get_ranges(1))[0][0]
        id_ = buffer.pop()
        if id_ is None:
            async with self._io_lock:
                id_ = buffer.pop()
                if id_ is None:
                    ranges = await self._run_locked(self._exchange.fetch(buffer.sync_want()))
                    id_ = buffer.push_but_first(ranges)
        if buffer.wants_refill():
            self._refill_wanted.set()
            await asyncio.sleep(0)  # let the refill task take the lock before the buffer runs dry
        return id_

    async def ping(self) -> opt.PingResult:
        answer = await self._run(self._exchange.run(Opcode.PING))
        return opt.PingResult(answer.rtt_s, self.options.servers[answer.server],
                              answer.response.node)

    async def info(self) -> Info:
        info = (await self._run(self._exchange.run(Opcode.INFO))).response.info
        assert info is not None  # decode_response: an OK INFO answer carries its body
        return info

    async def layout(self) -> Layout:
        if self._layout is None:
            self._layout = checked_layout(await self.info())
        return self._layout

    async def decode(self, id_: int) -> Decoded:
        return decode_with(await self.layout(), id_)

    def counters(self) -> opt.Counters:
        return self._exchange.counters.copy()

    # ---- driving an exchange over the DatagramProtocol ----

    async def _run(self, steps: Steps[T]) -> T:
        async with self._io_lock:
            return await self._run_locked(steps)

    async def _run_locked(self, steps: Steps[T]) -> T:
        if self._closed:
            raise opt.ShuttingDownError("the client is closed")
        try:
            action = next(steps)
            while True:
                action = steps.send(await self._perform(action))
        except StopIteration as stop:
            result: T = stop.value
            return result
        except asyncio.CancelledError:
            if self._closed:
                raise opt.ShuttingDownError("the client was closed during the call") from None
            raise

    async def _perform(self, action: Action) -> object:
        if self._closed:
            raise opt.ShuttingDownError("the client was closed during the call")
        if isinstance(action, Send):
            transport = self._protocols[action.server].transport
            assert transport is not None
            try:
                transport.sendto(action.datagram)  # connected: to its server
                return 0
            except OSError as error:
                return error.errno or errno.EIO
        if isinstance(action, Receive):
            queue = self._protocols[action.server].queue
            if not queue.empty():
                return queue.get_nowait()
            left = action.deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                return await asyncio.wait_for(queue.get(), left)
            except asyncio.TimeoutError:
                return None
        await asyncio.sleep(action.seconds)
        return None

    # ---- the refill task ----

    async def _refill_loop(self) -> None:
        buffer = self._prefetch
        assert buffer is not None  # the task runs only with prefetch on
        while not self._closed:
            await self._refill_wanted.wait()
            self._refill_wanted.clear()
            if not await self._refill(buffer):
                await asyncio.sleep(opt.REFILL_BACKOFF_S)

    async def _refill(self, buffer: PrefetchBuffer) -> bool:
        added = False
        while not self._closed:
            async with self._io_lock:
                want = buffer.refill_want()
                if want == 0:
                    break
                try:
                    buffer.push(await self._run_locked(self._exchange.fetch(want)))
                except opt.FlurryError:
                    buffer.refill_done(added, failed=not self._closed)
                    return False
            added = True
        buffer.refill_done(added, failed=False)
        return True
