"""Prompt -> frames -> audio: the one object the CLI and the GUI use.

CONTRACT (stable; the GUI depends on it):
    synth = Synthesizer(bundle_dir, threads=2)
    synth.languages            -> ["auto", "english", "chinese", ...] (from the bundle)
    synth.model_id             -> str, fingerprint that voices are tied to
    synth.default_settings     -> GenerationSettings filled from generation_config.json
    synth.create_voice(audio, ref_text=None, name="", language="auto") -> Voice
        audio: a path (any format soundfile reads) or (samples ndarray, sample_rate)
    synth.synthesize(text, voice, language="auto", settings=None) -> Iterator[SynthesisEvent]
        yields FrameEvent per frame (and AudioChunk when settings.stream_audio), then one SynthesisResult.
        Cancel by closing the generator (gen.close()) between frames.
    synth.decode(codes) -> float32 audio (codes: (T, 16) ints)
Bad input raises engine.errors.EngineError subclasses with a one-line message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .bundle import Bundle
from .types import GenerationSettings, SynthesisEvent
from .voice import Voice


class Synthesizer:
    def __init__(self, bundle: str | Path | Bundle, threads: int = 2):
        self.bundle = bundle if isinstance(bundle, Bundle) else Bundle.open(bundle)
        self.threads = threads

    @property
    def languages(self) -> list[str]:
        raise NotImplementedError

    @property
    def model_id(self) -> str:
        return self.bundle.manifest.get("model_id", "")

    @property
    def default_settings(self) -> GenerationSettings:
        raise NotImplementedError

    def create_voice(
        self, audio: str | Path | tuple[np.ndarray, int], ref_text: str | None = None, name: str = "",
        language: str = "auto",
    ) -> Voice:
        raise NotImplementedError

    def synthesize(
        self, text: str, voice: Voice, language: str = "auto", settings: GenerationSettings | None = None
    ) -> Iterator[SynthesisEvent]:
        raise NotImplementedError

    def decode(self, codes: np.ndarray) -> np.ndarray:
        raise NotImplementedError
