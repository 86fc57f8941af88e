"""A watchdog over the direct calls of one thread: it gives up on a call that overruns.

A call into another component's code in the caller's own thread (see
:mod:`mosaic.runtime.direct`) cannot be interrupted: a user's environment that hangs holds the
caller with it. What the caller would have done after a timeout over a socket (fail its run
naming the part), or after a cancel, a thread of the watchdog's does in its place, while the
caller stays frozen in the call; when the call comes back at last, it raises
:class:`~mosaic.core.errors.CallAbandoned` in the caller, which must then do nothing more.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from time import monotonic

from mosaic.core.errors import CallAbandoned, RequestTimeout

log = logging.getLogger(__name__)

#: How often the watchdog looks at the call under way; a call younger than this is not looked
#: at (a socket's wait runs its check after this long without an answer too).
CHECK_INTERVAL_S = 0.1
#: How long a call may still take to come back once its check has raised: a step that is only
#: slow when the run is cancelled should end, and the run's shutdown go, in order.
GRACE_S = 0.25

Check = Callable[[], None]


#: A call under way: (peer, timeout, check, when it started). A tuple, made by the caller on
#: every call, costs a fraction of an object's construction; the watchdog's thread tells one
#: call from the next by identity.
_Call = tuple[str, float, Check | None, float]


class Watchdog:
    """Watches the calls one thread makes, one at a time, with :meth:`begin` and :meth:`end`.

    Every :data:`CHECK_INTERVAL_S` its thread looks at the call under way, if it has run that
    long: it runs the call's ``check`` (which raises to end the wait: a cancelled run, a part
    that died) and, past the call's ``timeout``, takes :class:`RequestTimeout` (``"<peer> did
    not answer within <timeout> s"``, as a socket's wait says). A timeout gives the call up at
    once; the check's error when the call has not come back :data:`GRACE_S` later (the caller
    learns of a cancel or a death by its own ways when it does). Giving up:
    ``give_up(error)`` runs in the watchdog's thread, in the caller's place (the caller, held
    in the call, cannot run meanwhile: its :meth:`end` waits for ``give_up`` to finish, then
    raises :class:`CallAbandoned`). After that the watchdog's work is done and its thread ends.

    The thread starts with the first call and ends at :meth:`close`. ``name`` names it.
    """

    def __init__(self, name: str, give_up: Callable[[BaseException], None]) -> None:
        self.name = name
        self._give_up = give_up
        self._lock = threading.Lock()
        self._call: _Call | None = None
        self._abandoned = False
        #: The peer of the call given up on, once one was.
        self.abandoned_peer: str | None = None
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        #: The call whose check raised, and when its grace ends (the watchdog's thread only).
        self._graced: _Call | None = None
        self._grace_ends = 0.0

    def begin(self, peer: str, timeout: float, check: Check | None) -> None:
        """A call to ``peer`` starts, allowed ``timeout`` s, with ``check`` run while it lasts.

        Raises :class:`CallAbandoned` if an earlier call was given up on.
        """
        if self._thread is None:
            self._start()
        # No lock: with no call under way the watchdog gives nothing up, and once one was
        # given up on, the flag it set stays set.
        if self._abandoned:
            raise CallAbandoned(f"{self.name} was given up on: it makes no more calls")
        self._call = (peer, timeout, check, monotonic())

    def end(self) -> None:
        """The call under way has ended; raises :class:`CallAbandoned` if it was given up on
        (after the watchdog has done what the caller would have)."""
        with self._lock:
            self._call = None
            if self._abandoned:
                raise CallAbandoned(f"a call of {self.name} came back after it was given up on")

    def close(self) -> None:
        """Stop watching; the thread ends within :data:`CHECK_INTERVAL_S`. Idempotent."""
        self._closed.set()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name=f"watchdog of {self.name}",
                                        daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._closed.wait(CHECK_INTERVAL_S):
            call = self._call
            now = monotonic()
            if call is None or now - call[3] < CHECK_INTERVAL_S:
                continue
            error = self._verdict(call, now)
            if error is not None and self._abandon(call, error):
                return

    def _verdict(self, call: _Call, now: float) -> BaseException | None:
        """The error to give ``call`` up with now, or None to let it go on."""
        peer, timeout, check, started = call
        if now >= started + timeout:
            return RequestTimeout(f"{peer} did not answer within {timeout:g} s")
        if check is None:
            return None
        # Whatever the check raises ends the wait, after the grace.
        try:
            check()
        except BaseException as error:
            if self._graced is not call:
                self._graced, self._grace_ends = call, now + GRACE_S
            return error if now >= self._grace_ends else None
        return None

    def _abandon(self, call: _Call, error: BaseException) -> bool:
        """Give ``call`` up with ``error`` unless it came back meanwhile; True if it was."""
        with self._lock:
            if self._call is not call:
                return False  # it came back: the caller carries on
            self._abandoned = True
            self.abandoned_peer = call[0]
            log.debug("%s: gave up on a call to %s: %s", self.name, call[0], error)
            try:
                self._give_up(error)
            except Exception:
                log.exception("%s: giving up on a call to %s failed", self.name, call[0])
        return True

