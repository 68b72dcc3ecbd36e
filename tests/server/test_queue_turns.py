"""The engine thread's turns (qwen3tts_server/tasks.py), on a stand-in for the engine: a long text and the short
requests that arrive while it is read share the engine in turns of equal time, whatever a chunk takes."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from engine import GenerationSettings
from qwen3tts_server.task import SpeechTask
from qwen3tts_server.tasks import TaskQueue

LONG_CHUNK, SHORT = 10.0, 2.0  # stand-in seconds a long text's chunk and a short request take


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_task(name: str, long: bool) -> SpeechTask:
    return SpeechTask(text=name, voice=None, language="auto", instruct=None, settings=GenerationSettings(),
                      long=long, stream=True, post=lambda event: None, deadline=time.monotonic() + 60)


def test_a_long_text_and_short_requests_get_equal_engine_time():
    """A long text of 3 chunks of 10 s and 6 short requests of 2 s sent during its first chunk: after each chunk
    the short requests get as much engine time (five of them) before the next chunk, not one each time (which
    would leave the long text 10 s of every 12 and the sixth request waiting for three chunks)."""
    clock = Clock()
    served: list[str] = []
    shorts_sent = threading.Event()
    all_done = threading.Event()

    class Run:
        def __init__(self, synth, task: SpeechTask):
            self.task, self.chunks = task, 3 if task.long else 1

        def advance(self) -> bool:
            if self.task.long and self.chunks == 3:
                shorts_sent.wait(10)  # the short requests arrive while the first chunk is read
            clock.now += LONG_CHUNK if self.task.long else SHORT
            self.chunks -= 1
            served.append(self.task.text)
            if len(served) == 9:
                all_done.set()
            return self.chunks == 0

        def close(self) -> None:
            pass

    queue = TaskQueue(SimpleNamespace(suggested_batch_size=1), max_waiting=16, batch_wait=0, batch_size=1,
                      clock=clock)
    queue._engine_call = SimpleNamespace(SpeechRun=Run, speak_together=None)
    try:
        queue.submit(make_task("L", long=True))
        time.sleep(0.2)  # the engine thread has taken the long text
        for n in range(1, 7):
            queue.submit(make_task(f"S{n}", long=False))
        shorts_sent.set()
        assert all_done.wait(10), served
    finally:
        queue.close()
    assert served == ["L", "S1", "S2", "S3", "S4", "S5", "L", "S6", "L"]
