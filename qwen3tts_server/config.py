"""What a server is started with: where it listens, its key, and the limits every request is held to."""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from engine import EngineError, GenerationSettings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8880  # the port other OpenAI-compatible local speech servers use, so front ends' examples fit


@dataclass(frozen=True)
class Limits:
    """What one request may ask for, and how many may wait. Each is a refusal with its own status and line."""

    max_body_bytes: int = 1 << 20  # a body larger than this is refused (413) before it is read whole
    max_input_chars: int = 20_000  # about 20 minutes of speech; longer texts go to the app or `qwen3tts synth`
    max_waiting: int = 16  # requests waiting for the engine; one more is told 429 with Retry-After
    # a request, head and body, must arrive within this of its first byte (or of the connection opening): a client
    # sending slowly is told 408 and cut off (read_deadline.py)
    read_seconds: float = 15.0
    request_seconds: float = 900.0  # one request's generation; longer is stopped (504, or the stream ends)

    def check(self) -> None:
        for name in ("max_body_bytes", "max_input_chars", "max_waiting"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise EngineError(f"The server's {name.replace('_', ' ')} must be a whole number, 1 or more, "
                                  f"not {value!r}.")
        for name in ("read_seconds", "request_seconds"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise EngineError(f"The server's {name.replace('_', ' ')} must be more than 0, not {value!r}.")


@dataclass(frozen=True)
class ServerConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT  # 0: any free port (serving.py reports the one it got)
    api_key: str | None = None  # required as "Authorization: Bearer KEY" when set
    model_name: str = ""  # what /v1/models lists and `model` may name (besides OpenAI's own model names)
    voices_dir: Path | None = None  # the voice library; None: the app's default folder
    limits: Limits = field(default_factory=Limits)
    defaults: GenerationSettings | None = None  # a request's generation settings unless it sends its own
    # how long the engine waits, after a request arrives at an idle server, for others to run beside it
    batch_wait: float = 0.05

    def check(self) -> None:
        """EngineError (one line) for a configuration that must not start: another address without a key."""
        self.limits.check()
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise EngineError(f"The port must be a number from 0 to 65535, not {self.port!r}.")
        if self.api_key is not None and (len(self.api_key) < 8 or not self.api_key.isprintable()
                                         or any(c.isspace() for c in self.api_key)):
            raise EngineError("The API key must be at least 8 printable characters without spaces.")
        if not is_loopback(self.host) and not self.api_key:
            raise EngineError(f"Listening on {self.host} lets other computers use this server: give it an API key "
                              "(--api-key, or the QWEN3TTS_API_KEY environment variable).")
        if self.batch_wait < 0:
            raise EngineError(f"The batch wait must be 0 or more seconds, not {self.batch_wait!r}.")


def is_loopback(host: str) -> bool:
    """Only this computer can reach the address (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def new_api_key() -> str:
    """A key for the app's switch: 32 random URL-safe characters."""
    return "qt-" + secrets.token_urlsafe(24)
