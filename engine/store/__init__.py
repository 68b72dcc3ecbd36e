"""The model store: the Qwen3-TTS catalogue and the Whisper one (WHISPER_CATALOGUE: speech recognition), downloads through huggingface_hub, installed bundles by name; and
the voice library (VoiceLibrary: the saved voices, found by name).

Qt-free; the CLI (`qwen3tts models ...`) and the app's Models dialog and welcome screen use these names only.
"""

from .catalogue import (
    CATALOGUE,
    DEFAULT_PRECISION,
    WHISPER_CATALOGUE,
    WHISPER_PRECISION,
    CatalogueEntry,
    find_entry,
)
from .hub import DownloadProgress, HubError, endpoint_url, format_bytes, format_duration
from .installer import PendingDownload, discard_download, install, pending_downloads
from .move import move_store
from .store import ENV_DIR, InstalledModel, ModelStore, StoreError, default_models_dir, remember_models_dir
from .voice_library import VoiceLibrary, default_voices_dir

__all__ = [
    "CATALOGUE",
    "WHISPER_CATALOGUE",
    "WHISPER_PRECISION",
    "DEFAULT_PRECISION",
    "ENV_DIR",
    "CatalogueEntry",
    "DownloadProgress",
    "HubError",
    "InstalledModel",
    "ModelStore",
    "PendingDownload",
    "StoreError",
    "VoiceLibrary",
    "default_models_dir",
    "default_voices_dir",
    "discard_download",
    "endpoint_url",
    "find_entry",
    "format_bytes",
    "format_duration",
    "install",
    "move_store",
    "pending_downloads",
    "remember_models_dir",
]
