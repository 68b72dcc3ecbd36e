"""Every conversion option reaches the part converters: each part gets its own progress slice (a subclass of
ConvertOptions), which must carry every field of the options it was made from."""

from __future__ import annotations

from dataclasses import fields

from engine.convert import ConvertOptions, convert_checkpoint
from engine.convert import talker as talker_part
from tests.bundles import MODELS


def test_a_part_sees_every_option_the_conversion_was_given(tmp_path, monkeypatch):
    seen: list[ConvertOptions] = []
    real = talker_part.convert

    def spy(ckpt, writer, options):
        seen.append(options)
        return real(ckpt, writer, options)

    monkeypatch.setattr(talker_part, "convert", spy)
    convert_checkpoint(MODELS / "tiny06b", tmp_path / "b", "q8", parts=["talker"], check=False, smooth=False,
                       promote=["talker.0.o"], split={"talker.1.down": [3, 5]})
    (options,) = seen
    given = ConvertOptions("q8", None, None, False, frozenset({"talker.0.o"}), {"talker.1.down": (3, 5)})
    for f in fields(ConvertOptions):
        if f.name not in ("progress", "cancel"):  # the slice reports through its own
            assert getattr(options, f.name) == getattr(given, f.name), f.name
