"""Running the server: in the foreground until Ctrl+C (`qwen3tts serve`), or on a thread of its own beside the
app's window (BackgroundServer). uvicorn serves the Starlette app (http_app.py) with its pure-Python HTTP parser
(h11), held to a deadline for each request to arrive (read_deadline.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from engine import EngineError, SynthesizerContract

from .config import ServerConfig
from .engine_turns import EngineTurns
from .http_app import SpeechServer
from .read_deadline import read_deadline_protocol

MAX_CONNECTIONS = 512  # past this uvicorn answers 503 itself; the task queue's own limit comes far sooner


def _uvicorn_server(server: SpeechServer):
    import uvicorn

    config = server.config
    uv_config = uvicorn.Config(
        server.app, host=config.host.strip("[]"), port=config.port, log_level="warning", access_log=False,
        http=read_deadline_protocol(config.limits.read_seconds), loop="asyncio", ws="none", lifespan="off", timeout_keep_alive=5,
        limit_concurrency=MAX_CONNECTIONS,
        h11_max_incomplete_event_size=64 * 1024)  # request line and headers: a larger head is refused
    return uvicorn.Server(uv_config)


def address_of(uv_server, host: str) -> str:
    """http://HOST:PORT of a started server (the port it got when asked for any, port 0)."""
    port = uv_server.servers[0].sockets[0].getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}"


def run_server(synth: SynthesizerContract, config: ServerConfig,
               ready: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted; ready(address) once listening. EngineError (one line) if it cannot listen."""
    server = SpeechServer(synth, config)
    uv_server = _uvicorn_server(server)

    async def main() -> None:
        task = asyncio.create_task(uv_server.serve())
        while not uv_server.started and not task.done():
            await asyncio.sleep(0.05)
        if uv_server.started and ready is not None:
            ready(address_of(uv_server, config.host))
        await task

    try:
        asyncio.run(main())
    except SystemExit:  # uvicorn exits this way when it cannot bind
        raise EngineError(f"Cannot listen on {config.host}:{config.port}: the address is in use or not this "
                          "computer's (choose another --port or --host).") from None
    finally:
        server.close()
    if not uv_server.started:
        raise EngineError(f"Cannot listen on {config.host}:{config.port}: the address is in use or not this "
                          "computer's (choose another --port or --host).")


class BackgroundServer:
    """The server on a thread of its own (the app's switch, and tests): start() returns once it listens (or raises
    EngineError with the reason), stop() ends it and cancels what it was generating."""

    def __init__(self, synth: SynthesizerContract, config: ServerConfig, turns: EngineTurns | None = None):
        """turns: the model is the app's, used in turns with its own engine jobs (engine_turns.py)."""
        self.server = SpeechServer(synth, config, turns)
        self._uv = _uvicorn_server(self.server)
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None
        self.address = ""

    def start(self, timeout: float = 15.0) -> str:
        started = threading.Event()

        def run() -> None:
            try:
                asyncio.run(self._uv.serve())
            except BaseException as e:  # SystemExit when the port is taken
                self._failed = e
            finally:
                started.set()

        self._thread = threading.Thread(target=run, name="speech-server", daemon=True)
        self._thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout / 0.02)):
            if self._uv.started or started.is_set():
                break
            deadline.wait(0.02)
        if not self._uv.started:
            self.stop()
            raise EngineError(f"Cannot listen on {self.server.config.host}:{self.server.config.port}: the address "
                              "is in use or not this computer's.")
        self.address = address_of(self._uv, self.server.config.host)
        return self.address

    def stop(self, timeout: float = 10.0) -> None:
        self._uv.should_exit = True
        self.server.close()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._uv.started
