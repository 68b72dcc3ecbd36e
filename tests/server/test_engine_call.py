"""engine_call.py on a scripted synthesizer (tests/test_longform.py: what each text does is written down): a request
alone and requests side by side read the engine's events the same way, so a text the model makes nothing of fails
with 500 "no_audio" either way while its neighbours finish, and a refused one is a 400."""

from __future__ import annotations

import time

import numpy as np

from engine import GenerationSettings, speak, speak_many
from qwen3tts_server import engine_call
from qwen3tts_server.task import Audio, Failed, Finished, SpeechTask, Started
from tests.test_longform import VOICE, ScriptedSynth


class Scripted(ScriptedSynth):
    """The scripted synthesizer behind the engine's two doors, as the server calls them."""

    def speak(self, request, made=None):
        return speak(self, request, made)

    def speak_many(self, requests, batch_size=None, longest_first=True):
        return speak_many(self, requests, batch_size, longest_first)


def task(text: str, language: str = "english") -> tuple[SpeechTask, list]:
    posted: list = []
    return SpeechTask(text=text, voice=VOICE, language=language, instruct=None,
                      settings=GenerationSettings(seed=5, max_frames=20), long=False, stream=True,
                      post=posted.append, deadline=time.monotonic() + 60), posted


def test_a_text_the_model_makes_nothing_of_fails_alike_alone_and_side_by_side():
    synth = Scripted({"Nothing here.": ["empty"]})
    empty, empty_posted = task("Nothing here.")
    engine_call.SpeechRun(synth, empty).advance()
    fine, fine_posted = task("Something here.")
    refused, refused_posted = task("Hello.", language="klingon")
    together, together_posted = task("Nothing here.")
    engine_call.speak_together(synth, [fine, together, refused])
    for posted in (empty_posted, together_posted):
        failure = posted[-1]
        assert isinstance(failure, Failed) and failure.error.status == 500 and failure.error.code == "no_audio"
        assert "produced no audio" in failure.error.message and not any(isinstance(e, Audio) for e in posted)
    assert isinstance(refused_posted[-1], Failed) and refused_posted[-1].error.status == 400
    assert isinstance(fine_posted[0], Started) and isinstance(fine_posted[-1], Finished)
    audio = np.concatenate([e.samples for e in fine_posted if isinstance(e, Audio)])
    assert fine_posted[-1].seconds == len(audio) / 24000 > 0
