"""A deadline for a connection to deliver its request, head and body: uvicorn's h11 protocol with one timer added.

uvicorn has no such timeout: its keep-alive timer covers only the silence between requests and is reset by every
byte, so a client sending its headers a byte at a time would hold its connection (and one of the server's
limit_concurrency places) for ever; an ASGI app cannot help, as it runs only once the head is complete. uvicorn
takes the HTTP protocol class as its documented `http` setting, and this is its h11 protocol with a timer armed
when a request's first byte can come (the connection opens, or a kept-alive one receives the next request's first
byte) and disarmed once h11 has the whole request. When it fires first, h11 writes a 408 in OpenAI's error shape
(the app's request, if its head had come, sees its client gone) and the connection closes. Each timer is the
event loop's own (call_later): a slow client costs no thread and holds no one else up. A request h11 cannot parse
gets its 400 in OpenAI's shape too (uvicorn's own is plain text).

A refusal closes gently ("lingering close", as web servers do): the answer goes out, then the server's side of
the connection (FIN), and what the client still sends is read and dropped for a moment before the socket closes.
Closing at once with the client's bytes unread makes the kernel reset the connection, and a reset can throw away
the answer before the client has read it (seen under load: the slow client got "connection reset" and no 408)."""

from __future__ import annotations

import asyncio
from http import HTTPStatus

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .api_errors import ApiError


def read_deadline_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol class whose connections must deliver each request within `seconds`."""
    return type("ReadDeadlineProtocol", (ReadDeadlineProtocol,), {"read_seconds": seconds})


LINGER_SECONDS = 2.0  # how long a refused client's further bytes are read and dropped before the socket closes


class ReadDeadlineProtocol(H11Protocol):
    read_seconds = 15.0
    _read_timer: asyncio.TimerHandle | None = None
    _lingering = False

    def data_received(self, data: bytes) -> None:
        if self._lingering:  # refused: its answer is out, the rest of the request is dropped unread
            return
        super().data_received(data)

    def eof_received(self) -> None:
        if self._lingering:  # the client has read the answer and closed its side: close ours
            self.transport.close()
            return
        super().eof_received()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that opens and says nothing is held to the deadline too

    def handle_events(self) -> None:
        super().handle_events()
        state = self.conn.their_state
        if state is h11.SEND_BODY or (state is h11.IDLE and self.conn.trailing_data[0]):
            if self._read_timer is None:  # part of a request is here: it has read_seconds to arrive whole
                self._arm()
        elif state is not h11.IDLE:  # the request is in (or the connection is over): the response takes its time
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(self.read_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _too_slow(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if self.conn.their_state is h11.SEND_BODY and cycle is not None:  # the app waits for the body: it ends
            cycle.disconnected = True
            cycle.message_event.set()
            if cycle.response_started:  # it has answered already (a refusal before the body): nothing more to say
                self.transport.close()
                return
        self._refuse(ApiError(408, f"The request did not arrive within {self.read_seconds:g} s.", "request_timeout"))

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 cannot parse, in OpenAI's error shape like every other refusal."""
        self._refuse(ApiError(400, "The request is not HTTP/1.1 this server can read (a broken request line or "
                                   "header).", "invalid_http"))

    def _refuse(self, error: ApiError) -> None:
        """The error as the whole response, written by h11, then the connection closes."""
        body = bytes(error.response().body)
        try:
            out = self.conn.send(h11.Response(status_code=error.status, reason=HTTPStatus(error.status).phrase.encode(),
                                              headers=[(b"content-type", b"application/json"),
                                                       (b"content-length", str(len(body)).encode()),
                                                       (b"connection", b"close")]))
            out += self.conn.send(h11.Data(data=body))
            out += self.conn.send(h11.EndOfMessage()) or b""
            self.transport.write(out)
        except h11.LocalProtocolError:  # h11 cannot answer in this state: the connection just closes
            self.transport.close()
            return
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._lingering = True
        self.loop.call_later(LINGER_SECONDS, self.transport.close)
