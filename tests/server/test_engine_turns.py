"""EngineTurns: the app's open model shared with the speech server, one thread at a time, in the order asked."""

from __future__ import annotations

import threading
import time

import pytest

from engine import Cancelled
from qwen3tts_server.engine_turns import EngineTurns


def test_turns_are_had_one_at_a_time_in_the_order_asked():
    turns = EngineTurns()
    inside: list[int] = []
    order: list[int] = []
    overlap: list[tuple[int, ...]] = []

    def use(n: int) -> None:
        with turns.turn():
            inside.append(n)
            if len(inside) > 1:
                overlap.append(tuple(inside))
            order.append(n)
            time.sleep(0.02)
            inside.remove(n)

    with turns.turn():  # held: the others line up behind it, each asking after the one before
        threads = []
        for n in range(5):
            threads.append(threading.Thread(target=use, args=(n,)))
            threads[-1].start()
            while turns.waiting < n + 1:
                time.sleep(0.001)
    for t in threads:
        t.join(10)
    assert order == [0, 1, 2, 3, 4] and not overlap and turns.waiting == 0


def test_a_wait_given_up_raises_cancelled_and_holds_no_one_up():
    turns = EngineTurns()
    stop = threading.Event()
    said: list[str] = []
    outcome: list[str] = []

    def job() -> None:
        try:
            with turns.turn(stop.is_set, lambda: said.append("waiting")):
                outcome.append("ran")
        except Cancelled:
            outcome.append("cancelled")

    with turns.turn():
        t = threading.Thread(target=job)
        t.start()
        while turns.waiting < 1:
            time.sleep(0.001)
        stop.set()
        t.join(5)
    assert outcome == ["cancelled"] and said == ["waiting"] and turns.waiting == 0
    with turns.turn():  # the turn is free again
        pass


def test_an_error_inside_a_turn_frees_it():
    turns = EngineTurns()
    with pytest.raises(ValueError), turns.turn():
        raise ValueError("boom")
    with turns.turn(lambda: True):  # free at once: no wait to give up
        pass
