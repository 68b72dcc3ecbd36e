"""The HTTP side (Starlette on uvicorn): routes, the key, the body's limits, and a response that streams the
task's audio (or OpenAI's Server-Sent Events carrying it) and cancels it the moment its client goes away.

    POST /v1/audio/speech   OpenAI's speech request -> audio (speech_body.py says what a body may hold)
    GET  /v1/models         the served model
    GET  /v1/audio/voices   the voices a request may name (voices.py)
    GET  /health            {"status": "ok", ...}, without the key (for scripts that wait for the server)

Every refusal is OpenAI's JSON error shape (api_errors.py). Nothing the engine does runs on the event loop: a
request's checks run on Starlette's thread pool and its speech on the engine thread (tasks.py)."""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import logging
import secrets
import time
from dataclasses import replace
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from engine import (
    SAMPLES_PER_FRAME,
    EngineError,
    SynthesisRequest,
    SynthesizerContract,
    clean_text,
)
from engine.store import VoiceLibrary, default_voices_dir

from .api_errors import ApiError
from .audio_formats import Encoder
from .config import ServerConfig, is_loopback
from .engine_turns import EngineTurns
from .speech_body import OPENAI_MODELS, SpeechBody, parse_speech_body
from .task import Audio, Failed, Finished, SpeechTask, Started, TaskEvent
from .tasks import TaskQueue
from .voices import VoiceBook

log = logging.getLogger("qwen3tts_server")
GONE = 499  # the client closed the connection (nothing is sent)


class SpeechServer:
    """One served model: its voices, its task queue and the Starlette app over them."""

    def __init__(self, synth: SynthesizerContract, config: ServerConfig, turns: EngineTurns | None = None):
        """turns: the model is shared with the app, which takes turns with the server (engine_turns.py)."""
        config.check()
        self.synth = synth
        self.config = config
        self.model_name = config.model_name or synth.model_id or "qwen3-tts"
        self.defaults = config.defaults or synth.default_settings
        self.voices = VoiceBook(synth, VoiceLibrary(config.voices_dir or default_voices_dir()))
        self.queue = TaskQueue(synth, config.limits.max_waiting, config.batch_wait, turns=turns)
        self.app = Starlette(
            routes=[
                Route("/v1/audio/speech", self.speech, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/models/{name:path}", self.model, methods=["GET"]),
                Route("/v1/audio/voices", self.voice_list, methods=["GET"]),
                Route("/health", self.health, methods=["GET"]),
            ],
            exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _server_error},
        )

    def close(self) -> None:
        self.queue.close()

    # ------------------------------------------------------------------------------ access
    def check_access(self, request: Request) -> None:
        """The key when one is set (compared in constant time); without one the server listens on this computer
        only, and answers only requests addressed to it (a web page cannot reach it by a DNS name of its own)."""
        key = self.config.api_key
        if key:
            given = request.headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
                raise ApiError(401, "Missing or wrong API key: send the server's key as 'Authorization: Bearer KEY'.",
                               "invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
            return
        host = request.headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host[1:].split("]", 1)[0]
        if not is_loopback(name):
            raise ApiError(403, f"This server answers requests addressed to this computer only, not to {host!r}.",
                           "host_not_allowed")

    # ------------------------------------------------------------------------------ routes
    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "model": self.model_name, "waiting": self.queue.waiting,
                             "running": self.queue.running})

    async def models(self, request: Request) -> Response:
        self.check_access(request)
        return JSONResponse({"object": "list", "data": [self._model_card()]})

    async def model(self, request: Request) -> Response:
        self.check_access(request)
        self.served_model(request.path_params["name"])
        return JSONResponse(self._model_card())

    async def voice_list(self, request: Request) -> Response:
        self.check_access(request)
        voices = await run_in_threadpool(self.voices.listing)
        return JSONResponse({"model": self.model_name, "model_kind": self.synth.kind.kind, "voices": voices})

    async def speech(self, request: Request) -> Response:
        self.check_access(request)
        data = await read_json(request, self.config)
        body = parse_speech_body(data, self.config.limits, self.defaults)
        self.served_model(body.model)
        loop = asyncio.get_running_loop()
        channel: asyncio.Queue[TaskEvent] = asyncio.Queue()

        def post(event: TaskEvent) -> None:  # from the engine thread
            try:
                loop.call_soon_threadsafe(channel.put_nowait, event)
            except RuntimeError:  # the loop has closed: the server is stopping
                pass

        encoder = Encoder(body.response_format)
        task = await run_in_threadpool(self.make_task, body, encoder.streams, post)
        self.queue.submit(task)
        if body.stream_format == "sse":
            return SseSpeechResponse(task, channel, encoder)
        return SpeechResponse(task, channel, encoder)

    # ------------------------------------------------------------------------------ helpers
    def served_model(self, name: str) -> None:
        wanted = name.strip().casefold()
        if wanted and wanted != self.model_name.casefold() and wanted not in OPENAI_MODELS:
            raise ApiError(404, f"The model {name!r} is not served here; this server speaks with "
                                f"{self.model_name!r} (GET /v1/models).", "model_not_found", "model")

    def _model_card(self) -> dict[str, Any]:
        return {"id": self.model_name, "object": "model", "created": 0, "owned_by": "qwen3-tts-studio",
                "model_kind": self.synth.kind.kind}

    def make_task(self, body: SpeechBody, stream: bool, post) -> SpeechTask:
        """The checks that need the model (language, settings, instruction, voice, length), on a worker thread."""
        synth = self.synth
        try:
            text = clean_text(body.text)
            language = synth.check_language(body.language)
            instruct = synth.kind.check_instruct(body.instructions) if body.instructions else None
            settings = body.settings
            if settings.seed is None:  # fixed now, so that the response can say which seed made it
                settings = replace(settings, seed=secrets.randbelow(2**32))
            synth.check_settings(settings)
            voice = self.voices.resolve(body.voice, body.instructions)
            chunks = SynthesisRequest(text, language=language).chunks()
        except EngineError as e:
            raise ApiError(400, str(e)) from None
        limit = self.config.limits.request_seconds
        if len(chunks) == 1:  # the text as speak() speaks a text of one chunk, so that side by side it is the same
            text = chunks[0].text
        return SpeechTask(text=text, voice=voice, language=language, instruct=instruct or None, settings=settings,
                          long=len(chunks) > 1, stream=stream, post=post, deadline=time.monotonic() + limit,
                          timeout_seconds=limit)



async def read_json(request: Request, config: ServerConfig) -> object:
    """The body as JSON: application/json, at most max_body_bytes. The time it may take to arrive is the
    connection's deadline (read_deadline.py): when it passes, the client is told 408 and the stream ends here."""
    limits = config.limits
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(415, f"Send the request as JSON (Content-Type: application/json), not {kind or 'no type'!r}.",
                       "unsupported_media_type")
    too_big = ApiError(413, f"The request body is larger than this server's limit of {limits.max_body_bytes} bytes.",
                       "request_too_large")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise too_big
    body = bytearray()
    try:
        async for part in request.stream():
            body.extend(part)
            if len(body) > limits.max_body_bytes:
                raise too_big
    except ClientDisconnect:
        raise ApiError(GONE, "The client closed the connection, or its request came too slowly.") from None
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ApiError(400, f"The request body is not valid JSON: {e}", "invalid_json") from None


class SpeechResponse(Response):
    """The audio of one task: streamed formats as it comes (a chunked body), the others whole at the end. A JSON
    error instead while nothing has been sent. The client leaving cancels the task at once, at any point."""

    def __init__(self, task: SpeechTask, channel: asyncio.Queue[TaskEvent], encoder: Encoder):
        self.task = task
        self.channel = channel
        self.encoder = encoder
        self.status_code = 200
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.task.cancel()
            self.channel.put_nowait(Failed(ApiError(GONE, "The client closed the connection.")))

        watcher = asyncio.create_task(watch())
        try:
            await self._respond(send)
        except OSError:  # the client left while we were sending
            self.task.cancel()
        finally:
            self.task.cancel()  # a finished task ignores it; an unfinished one stops before its next frame
            watcher.cancel()

    async def _opening(self, send: Send, content_type: str) -> list[tuple[bytes, bytes]] | None:
        """The task's first event: its response headers once it has started, None when it failed before (its JSON
        error is sent then)."""
        first = await self.channel.get()
        if isinstance(first, Failed):
            await _send_error(send, first.error)
            return None
        assert isinstance(first, Started)
        headers = [(b"content-type", content_type.encode()), (b"cache-control", b"no-store"),
                   (b"x-batched", str(first.batched).encode())]
        if first.seed is not None:
            headers.append((b"x-seed", str(first.seed).encode()))
        return headers

    async def _respond(self, send: Send) -> None:
        headers = await self._opening(send, self.encoder.media_type)
        if headers is None:
            return
        if self.encoder.streams:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": self.encoder.start(), "more_body": True})
        while True:
            event = await self.channel.get()
            if isinstance(event, Audio):
                data = self.encoder.add(event.samples)
                if data:
                    await send({"type": "http.response.body", "body": data, "more_body": True})
            elif isinstance(event, Finished):
                data = self.encoder.finish()
                if not self.encoder.streams:
                    headers.append((b"content-length", str(len(data)).encode()))
                    await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": data, "more_body": False})
                return
            elif isinstance(event, Failed):
                if not self.encoder.streams:
                    await _send_error(send, event.error)
                elif event.error.status != GONE:
                    # the status has gone out: end without the closing chunk, so the client sees a cut body
                    log.warning("speech stopped mid-stream: %s", event.error.message)
                    raise _StreamCut(event.error.message)
                return


class SseSpeechResponse(SpeechResponse):
    """stream_format "sse": OpenAI's Server-Sent Events, each a `data:` line of JSON. `speech.audio.delta` events
    carry the audio (base64, in the response_format: wav and pcm as it is made, the others whole at the end, in
    pieces) and one `speech.audio.done` ends it with the usage. A failure once the events have begun is an `error`
    event in OpenAI's error shape; a stream without `speech.audio.done` is incomplete."""

    async def _respond(self, send: Send) -> None:
        headers = await self._opening(send, "text/event-stream")
        if headers is None:
            return
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        samples = 0

        async def deltas(data: bytes) -> None:
            for at in range(0, len(data), SSE_PIECE_BYTES):
                await send({"type": "http.response.body", "more_body": True, "body": sse_event(
                    {"type": "speech.audio.delta", "audio": base64.b64encode(data[at:at + SSE_PIECE_BYTES]).decode()})})

        await deltas(self.encoder.start())  # the WAV header goes out at once, as in a streamed audio body
        while True:
            event = await self.channel.get()
            if isinstance(event, Audio):
                samples += len(event.samples)
                await deltas(self.encoder.add(event.samples))
            elif isinstance(event, Finished):
                await deltas(self.encoder.finish())
                await send({"type": "http.response.body", "more_body": False,
                            "body": sse_event({"type": "speech.audio.done", "usage": usage(self.task.text, samples)})})
                return
            elif isinstance(event, Failed):
                if event.error.status != GONE:
                    log.warning("speech stopped mid-stream: %s", event.error.message)
                    await send({"type": "http.response.body", "more_body": False,
                                "body": sse_event({"type": "error", **event.error.body()})})
                return


SSE_PIECE_BYTES = 48 * 1024  # audio bytes per delta event (64 KB of base64): a whole file goes in pieces


def sse_event(data: dict[str, Any]) -> bytes:
    """One Server-Sent Event: a `data:` line of compact JSON (no line breaks inside) and the blank line."""
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def usage(text: str, samples: int) -> dict[str, int]:
    """speech.audio.done's usage, in OpenAI's keys: input_tokens counts the input's characters (this model has no
    price per token to report), output_tokens the audio's 80 ms frames (12.5 a second)."""
    frames = -(-samples // SAMPLES_PER_FRAME)
    return {"input_tokens": len(text), "output_tokens": frames, "total_tokens": len(text) + frames}


class _StreamCut(Exception):
    pass


async def _send_error(send: Send, error: ApiError) -> None:
    if error.status == GONE:
        return
    response = error.response()
    await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": False})


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    words = {404: f"There is nothing at {request.url.path}; the speech endpoint is POST /v1/audio/speech.",
             405: f"{request.method} is not offered at {request.url.path}."}
    return ApiError(exc.status_code, words.get(exc.status_code, str(exc.detail))).response()


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("request failed", exc_info=exc)
    return ApiError(500, f"The server failed: {type(exc).__name__}.").response()
