"""A take: one generated result with everything needed to replay, save or regenerate it."""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..engine_adapter import (
    SAMPLING_SETTINGS,
    SETTING,
    GenerationSettings,
    SynthesisResult,
    Voice,
    VoiceChoice,
)
from .paths import readable_name
from .take_file import StoredResult


@dataclass
class Take:
    number: int
    text: str
    voice_name: str
    voice: VoiceChoice  # a cloned Voice, a preset speaker's name (CustomVoice) or None (VoiceDesign)
    language: str
    settings: GenerationSettings
    result: SynthesisResult | StoredResult  # a kept take reads its audio from its file when it is used
    created: str = field(default_factory=lambda: _dt.datetime.now().isoformat(sep=" ", timespec="seconds"))
    instruct: str | None = None  # the style instruction (CustomVoice) or voice description (VoiceDesign)
    voice_file: Path | None = None  # a kept take's cloned voice, read when it is regenerated (voice is None)
    device: str = ""  # where it was made ("the CPU", "GPU 0: name, exact"); "" for takes kept before it was noted

    def ready_voice(self) -> VoiceChoice:
        """The voice to regenerate with: a kept take's voice file is read now (VoiceError if it cannot be)."""
        if self.voice is None and self.voice_file is not None:
            self.voice = Voice.load(self.voice_file)
        return self.voice

    @property
    def audio(self) -> np.ndarray:
        return self.result.audio

    @property
    def seed(self) -> int | None:
        return self.result.seed

    @property
    def frames(self) -> int:
        result = self.result
        return result.frames if isinstance(result, StoredResult) else len(result.codes)

    def label(self) -> str:
        text = " ".join(self.text.split())
        short = text if len(text) <= 48 else text[:47] + "…"
        seed = SETTING["greedy"].label.lower() if self.settings.greedy else f"{SETTING['seed'].label.lower()} {self.seed}"
        return f"#{self.number}  {self.result.seconds:.1f} s · {self.voice_name} · {seed}\n“{short}”"

    def details(self) -> str:
        """Everything that made this take (shown as the take's tooltip)."""
        s = self.settings
        said = [spec for spec in SAMPLING_SETTINGS if getattr(s, spec.name) is not None]  # None: the model's own
        random = [f"{spec.label.lower()} {getattr(s, spec.name)}" for spec in said if spec.random]
        sampling = [SETTING["greedy"].label.lower() if s.greedy else ", ".join(random)]
        sampling += [f"{spec.label.lower()} {getattr(s, spec.name)}" for spec in said if not spec.random]
        cap = str(s.max_frames) if s.max_frames else "automatic"
        instruct = f"Instruction: {self.instruct}\n" if self.instruct else ""
        device = f" · made on {self.device}" if self.device else ""
        return (f"{self.text}\n\nVoice: {self.voice_name} · language: {self.language}\n{instruct}"
                f"{SETTING['seed'].label} {self.seed} · {' · '.join(filter(None, sampling))}\n"
                f"{SETTING['max_frames'].label} {cap} · {self.frames} frames, ended by {self.result.ended_by}{device} · "
                f"made {self.created}")

    def file_stem(self) -> str:
        return readable_name(self.text)

    def with_new_seed(self) -> GenerationSettings:
        """Same settings, a fresh random seed (the engine picks it and reports it in the result)."""
        return replace(self.settings, seed=None)


@dataclass
class PendingTake:
    """What the running generation will become as a take, once its result arrives."""

    text: str
    voice: VoiceChoice  # None: VoiceDesign makes the voice from the instruction
    voice_name: str
    language: str
    settings: GenerationSettings
    instruct: str | None = None
    design: bool = False  # a VoiceDesign preview
    started: float = field(default_factory=time.monotonic)
    device: str = ""  # where the model runs (engine_adapter.runs_on)

    def take(self, number: int, result: SynthesisResult) -> Take:
        return Take(number, self.text, self.voice_name, self.voice, self.language, self.settings, result,
                    instruct=self.instruct, device=self.device)
