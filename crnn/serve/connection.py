"""The server's HTTP connections: uvicorn's HTTP/1.1 protocol with a deadline on each
request's headers.

uvicorn times nothing before a request's headers are complete: a client that connects and
sends nothing, or trickles its headers a byte at a time (slowloris), holds its connection
open for as long as it likes, and enough of them hold every socket the process may open.
The body's own deadline is :class:`crnn.serve.app.BodyLimit`'s; this is the one before it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

# What a client whose headers came too late is told before its connection is closed.
TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: application/json\r\n"
    b"connection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)


class TimedHeaders(H11Protocol):
    """uvicorn's h11 protocol, whose request headers must all arrive within
    :attr:`header_timeout_s` of the connection opening (or of the first byte of the next
    request on a kept-alive connection); else 408 and the connection is closed."""

    header_timeout_s = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._between_requests():
            self._disarm()  # the headers are in: the body's deadline is BodyLimit's
        elif self._deadline is None:
            self._arm()  # the next request on a kept-alive connection has begun

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or not self._between_requests():
            return
        body = (
            b'{"error": "the request headers took over %g s to arrive (--header-timeout-s)"}'
            % self.header_timeout_s
        )
        self.transport.write(TIMEOUT_RESPONSE % (len(body), body))
        self.transport.close()


def timed_headers(seconds: float) -> type[TimedHeaders]:
    """The protocol class to give ``uvicorn.run(http=...)``: headers within ``seconds``."""
    if not seconds > 0:
        raise ValueError(f"header timeout {seconds!r} s: expected a positive number of seconds")
    return type("TimedHeaders", (TimedHeaders,), {"header_timeout_s": float(seconds)})
