"""The prefetch buffer's bookkeeping, shared by Client (a refill thread) and AsyncClient (a
refill task), as the C++ client/prefetch.cc does it.

Contract:
  * Only the holder of the client's I/O lock pushes; everyone else only pops. So the room
    computed under the lock can only grow before the push, and the buffer never holds more
    than Options.prefetch IDs.
  * The refill starts at once, runs when the buffer falls below half, asks one request at a
    time (releasing the I/O lock in between so get()/ping() callers are not starved) and stops
    when the room left is less than one full request (or half the buffer): topping up by a few
    IDs while consumers drain would turn one large request into many tiny ones.
  * After a failed refill the refill waits REFILL_BACKOFF_S, so a dead server is not hammered
    by an idle client. IDs left in the buffer at close() are never used.
"""

from __future__ import annotations

import collections
import itertools

from .options import Counters, Options


def expand(ranges: list[tuple[int, int]]) -> list[int]:
    """Every ID of `ranges`, in order."""
    return list(itertools.chain.from_iterable(range(first, first + count)
                                              for first, count in ranges))


class PrefetchBuffer:
    def __init__(self, options: Options, counters: Counters):
        self.capacity = options.prefetch
        self.ids_per_request = options.ids_per_request
        self.counters = counters  # only prefetch_refills and prefetch_failures are touched
        self.ids: collections.deque[int] = collections.deque()  # popleft/extend are atomic
        self.refill_requested = True  # a wake-up is pending or a refill is running

    def pop(self) -> int | None:
        try:
            return self.ids.popleft()
        except IndexError:
            return None

    def wants_refill(self) -> bool:
        """True once per drop below half: the caller then wakes the refill."""
        if len(self.ids) >= self.capacity // 2 or self.refill_requested:
            return False
        self.refill_requested = True
        return True

    def sync_want(self) -> int:
        """How many IDs a caller that found the buffer empty fetches itself (under the lock)."""
        return max(1, min(self.capacity - len(self.ids), self.ids_per_request))

    def refill_want(self) -> int:
        """How many IDs the refill asks for next (under the lock); 0 when it should stop."""
        room = self.capacity - len(self.ids)
        if room <= 0 or room < min(self.ids_per_request, self.capacity // 2):
            return 0
        return min(room, self.ids_per_request)

    def push(self, ranges: list[tuple[int, int]]) -> None:
        """Buffers the IDs of `ranges`."""
        self.ids.extend(expand(ranges))

    def push_but_first(self, ranges: list[tuple[int, int]]) -> int:
        """Buffers the IDs of `ranges` (at least one) but the first, and returns that one."""
        ids = expand(ranges)
        self.ids.extend(ids[1:])
        return ids[0]

    def refill_done(self, added: bool, failed: bool) -> None:
        self.refill_requested = False
        if added:
            self.counters.prefetch_refills += 1
        if failed:
            self.counters.prefetch_failures += 1
