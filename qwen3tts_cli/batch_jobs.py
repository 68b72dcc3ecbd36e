"""The jobs file of `qwen3tts batch`: one JSON object per line.

    {"name": "intro", "text": "...", "language": "english", "ref": "ref.wav", "ref_text": "..."}
    {"name": "b", "text": "...", "ref": "ref.wav"}            (no ref_text: the voice's timbre only, as in the app)
    {"name": "c", "text": "...", "ref": "ref.wav", "ref_text": "auto"}   (the reference transcribed by Whisper)
    {"name": "c", "text": "...", "voice": "narrator.qvoice", "max_frames": 200, "seed": 7}
                                    (any generation setting by its name: "temperature", "top_k", "greedy"...)
    {"name": "d", "text": "...", "speaker": "serena", "instruct": "Slowly."}     (CustomVoice)
    {"name": "e", "text": "...", "instruct": "A deep, calm voice."}            (VoiceDesign)

Relative paths are relative to the jobs file's folder. Blank lines and lines starting with # are skipped. A bad
line becomes a JobLine with an error naming its line number; the other lines are unaffected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import GENERATION_SETTINGS, read_text_file

# a line may give itself any generation setting, by its name, checked by its declaration (engine/setting_specs.py)
LINE_SETTINGS = GENERATION_SETTINGS
KEYS = {"name", "text", "language", "ref", "ref_text", "x_vector_only", "voice", "speaker", "instruct",
        *(spec.name for spec in LINE_SETTINGS)}
NAME_BAD_CHARS = set('/\\:*?"<>|\0')


@dataclass(frozen=True)
class JobLine:
    """One line of the jobs file: its fields, or the reason it cannot run."""

    line: int
    name: str
    text: str = ""
    language: str = "auto"
    ref: Path | None = None
    ref_text: str | None = None
    x_vector_only: bool = False
    voice: Path | None = None
    settings: dict[str, Any] = field(default_factory=dict, hash=False)  # the line's own generation settings
    speaker: str | None = None  # a CustomVoice preset speaker
    instruct: str | None = None  # a style instruction (CustomVoice 1.7B) or the voice description (VoiceDesign)
    error: str | None = None


def read_jobs(path: Path) -> list[JobLine]:
    """Every non-blank line of the jobs file as a JobLine (bad ones carry `error`)."""
    base = path.parent
    jobs: list[JobLine] = []
    names: set[str] = set()
    for number, raw in enumerate(read_text_file(path).splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        job = _parse(raw, number, base)
        if job.error is None and job.name in names:
            job = JobLine(number, job.name, error=f"Line {number}: the name {job.name!r} is used by an earlier line.")
        names.add(job.name)
        jobs.append(job)
    return jobs


def _parse(raw: str, number: int, base: Path) -> JobLine:
    fallback = f"line{number}"

    def bad(message: str, name: str = fallback) -> JobLine:
        return JobLine(number, name, error=f"Line {number}: {message}")

    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        return bad(f"not valid JSON ({e.msg} at column {e.colno}).")
    if not isinstance(obj, dict):
        return bad("a job must be a JSON object {...}.")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return bad('every job needs a "name" (the output file name).')
    name = name.strip()
    if name.startswith(".") or NAME_BAD_CHARS & set(name):
        return bad(f'the name {name!r} cannot be a file name (no path separators, no leading dot).', fallback)
    unknown = sorted(set(obj) - KEYS)
    if unknown:
        return bad(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}.", name)
    text, language = obj.get("text"), obj.get("language", "auto")
    if not isinstance(text, str) or not text.strip():
        return bad('"text" must be a non-empty string.', name)
    if not isinstance(language, str):
        return bad('"language" must be a string.', name)
    ref, voice, ref_text = obj.get("ref"), obj.get("voice"), obj.get("ref_text")
    speaker, instruct = obj.get("speaker"), obj.get("instruct")
    x_only = obj.get("x_vector_only", False)
    given = [f for f, v in (("ref", ref), ("voice", voice), ("speaker", speaker)) if v is not None]
    if len(given) > 1:
        return bad(f'give one voice: "{given[0]}" or "{given[1]}", not both.', name)
    # no voice at all is a VoiceDesign line (the model refuses it if it needs a voice or a speaker)
    for key, value in (("ref", ref), ("voice", voice), ("ref_text", ref_text), ("speaker", speaker),
                       ("instruct", instruct)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            return bad(f'"{key}" must be a non-empty string.', name)
    if not isinstance(x_only, bool):
        return bad('"x_vector_only" must be true or false.', name)
    if voice is not None and ref_text is not None:
        return bad('"ref_text" goes with "ref"; a voice file already holds its transcript.', name)
    settings: dict[str, Any] = {}
    for spec in LINE_SETTINGS:
        value = obj.get(spec.name)
        problem = None if value is None else spec.problem(value, called=f'"{spec.name}"')
        if problem:
            return bad(problem, name)
        if value is not None:
            settings[spec.name] = value
    return JobLine(
        number, name, text=text, language=language,
        ref=(base / ref) if ref is not None else None, ref_text=None if x_only else ref_text, x_vector_only=x_only,
        voice=(base / voice) if voice is not None else None, speaker=speaker, instruct=instruct,
        settings=settings,
    )
