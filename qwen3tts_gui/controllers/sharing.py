"""The app's "Let other apps use these voices": the speech server (qwen3tts_server, OpenAI's audio API) on a
thread beside the window, so that other programs on this computer can speak with the library's voices.

It speaks with the model the app has open, never a second copy (a full-size model is gigabytes): the server's
engine thread and the app's engine jobs take turns with it (AppContext.engine_turns), one thread at a time, in the
order they asked, so a request waits while the app generates and the app's next job waits for the request in
progress; the window never waits (a job waits on its own thread). It serves the app's voice folder, listens on
127.0.0.1 only (unless the user lets other computers and containers in) and asks for a key of its own, kept in the
settings so other programs stay set up. A request's generation settings default to the app's (the settings box's
values when the server starts). Off each time the app starts; a new model or voice folder restarts it; turning it
off stops whatever it was generating."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ..context import AppContext
from ..diagnostics import log
from ..engine_adapter import GenerationSettings

OFF, STARTING, ON = "off", "starting", "on"


class VoiceSharing(QObject):
    changed = Signal()  # state, address or problem changed
    _started = Signal(object, object, str)  # (token, server, address) from the starting thread
    _failed = Signal(object, str)  # (token, one line)

    def __init__(self, ctx: AppContext, parent: QObject | None = None,
                 defaults: Callable[[], GenerationSettings] | None = None):
        """defaults(): the generation settings a request gets unless it sends its own (the app's settings box);
        None: the model's."""
        super().__init__(parent)
        self.ctx = ctx
        self._defaults = defaults
        self.state = OFF
        self.address = ""
        self.problem = ""
        self._server: object | None = None  # qwen3tts_server.BackgroundServer
        self._token: object = None  # which start a thread's answer belongs to (a newer one wins)
        self._started.connect(self._on_started)
        self._failed.connect(self._on_failed)
        ctx.model_changed.connect(self._restart)
        ctx.voices_changed.connect(self._restart_for_folder)
        self._folder = ctx.library.folder

    # ------------------------------------------------------------------------------ what the dialog shows
    @property
    def key(self) -> str:
        if not self.ctx.settings.sharing_key:
            from qwen3tts_server.config import new_api_key

            self.ctx.settings.sharing_key = new_api_key()
        return self.ctx.settings.sharing_key

    @property
    def port(self) -> int:
        return self.ctx.settings.sharing_port

    def set_port(self, port: int) -> None:
        if port != self.ctx.settings.sharing_port:
            self.ctx.settings.sharing_port = port
            self._restart()

    @property
    def everywhere(self) -> bool:
        """Other computers and containers (Docker) may connect too: the server listens on every address."""
        return self.ctx.settings.sharing_everywhere

    def set_everywhere(self, on: bool) -> None:
        if on != self.ctx.settings.sharing_everywhere:
            self.ctx.settings.sharing_everywhere = on
            self._restart()

    def new_key(self) -> None:
        """A new key (the old one stops working at once; other programs need the new one)."""
        from qwen3tts_server.config import new_api_key

        self.ctx.settings.sharing_key = new_api_key()
        self._restart()

    @property
    def server(self):
        """The running qwen3tts_server.BackgroundServer, or None."""
        return self._server

    # ------------------------------------------------------------------------------ on and off
    def set_enabled(self, on: bool) -> None:
        if on and self.state == OFF:
            self._start()
        elif not on and self.state != OFF:
            self._stop()
            self.problem = ""
            self.changed.emit()

    def shutdown(self) -> None:
        """The app is closing: stop the server and what it generates."""
        self._stop()

    def _start(self) -> None:
        path, synth = self.ctx.model_path, self.ctx.synth
        if path is None or synth is None:
            self.state, self.problem = OFF, "Open a model first: the other programs speak with the model that is open."
            self.changed.emit()
            return
        from qwen3tts_server import ServerConfig

        config = ServerConfig(host="0.0.0.0" if self.everywhere else "127.0.0.1", port=self.port, api_key=self.key,
                              model_name=Path(path).name,
                              voices_dir=self.ctx.library.folder,
                              defaults=self._defaults() if self._defaults is not None else None)
        turns = self.ctx.engine_turns
        token = self._token = object()
        self.state, self.address, self.problem = STARTING, "", ""
        self.changed.emit()

        def run() -> None:  # importing the HTTP stack and binding the port: never on the GUI thread
            try:
                from qwen3tts_server import BackgroundServer

                server = BackgroundServer(synth, config, turns)
                address = server.start()
            except Exception as e:  # noqa: BLE001 - any failure is one line in the dialog, never a crash
                self._failed.emit(token, str(e) or type(e).__name__)
                return
            self._started.emit(token, server, address)

        threading.Thread(target=run, name="voice-sharing-start", daemon=True).start()

    def _on_started(self, token: object, server, address: str) -> None:
        if token is not self._token:  # turned off or restarted meanwhile
            server.stop()
            return
        if self.everywhere:  # 0.0.0.0 is no address to give: this computer's name, which others can reach
            import socket

            address = f"http://{socket.gethostname()}:{self.port}"
        self._server, self.state, self.address = server, ON, f"{address}/v1"
        log.info("sharing voices at %s", self.address)
        self.changed.emit()

    def _on_failed(self, token: object, message: str) -> None:
        if token is not self._token:
            return
        self.state, self.problem = OFF, message
        log.warning("voice sharing could not start: %s", message)
        self.changed.emit()

    def _stop(self) -> None:
        self._token = None
        server, self._server = self._server, None
        self.state, self.address = OFF, ""
        if server is not None:
            server.stop()  # type: ignore[attr-defined]

    def _restart(self) -> None:
        if self.state != OFF:
            self._stop()
            self._start()

    def _restart_for_folder(self) -> None:
        if self.ctx.library.folder != self._folder:
            self._folder = self.ctx.library.folder
            self._restart()
