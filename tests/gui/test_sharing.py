"""File > Let other apps use these voices: the speech server beside the window, with the open model's own copy,
the app's voice folder, 127.0.0.1 and the app's key."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import numpy as np
import pytest

from qwen3tts_gui.engine_adapter import Voice, open_synthesizer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, key: str | None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_switch_serves_the_open_model_and_the_librarys_voices(qtbot, make_window, demo_bundle, settings):
    settings.sharing_port = _free_port()
    window = make_window(model=False, voice=False, open_synth=open_synthesizer)
    sharing = window.sharing
    sharing.set_enabled(True)  # no model yet: it says so and stays off
    assert sharing.state == "off" and "Open a model" in sharing.problem
    with qtbot.waitSignal(window.ctx.model_changed, timeout=60000):
        window.open_model(demo_bundle)
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=60000)
    synth = window.ctx.synth
    window.ctx.library.add(Voice(xvector=np.ones(synth.hidden_size, np.float32), model_id=synth.model_id,
                                 name="Shared voice"))

    window.settings_box.temperature.setValue(0.55)  # the app's settings are the requests' defaults
    window.show_sharing()
    sharing.set_enabled(True)
    qtbot.waitUntil(lambda: sharing.state == "on", timeout=60000)
    assert sharing.server.server.defaults.temperature == pytest.approx(0.55)
    assert sharing.server.server.defaults.seed is None
    assert sharing.address == f"http://127.0.0.1:{settings.sharing_port}/v1"
    key = settings.sharing_key
    assert len(key) >= 20  # made once, kept in the settings
    status, body = _get(f"{sharing.address}/audio/voices", key)
    assert status == 200 and [v["name"] for v in body["voices"]] == ["Shared voice"]
    assert _get(f"{sharing.address}/models", None)[0] == 401
    assert _get(f"{sharing.address}/models", "wrong-key-0000")[0] == 401

    sharing.new_key()  # the old key stops working
    qtbot.waitUntil(lambda: sharing.state == "on", timeout=60000)
    assert settings.sharing_key != key and _get(f"{sharing.address}/models", key)[0] == 401
    assert _get(f"{sharing.address}/models", settings.sharing_key)[0] == 200

    from qwen3tts_gui.widgets.sharing_dialog import SharingDialog

    dialog = window.findChild(SharingDialog)  # what the user copies into the other program
    assert dialog.address.text() == sharing.address and dialog.key.text() == settings.sharing_key
    assert dialog.switch.isChecked() and dialog.status.text().startswith("On")
    dialog.everywhere.setChecked(True)  # other computers and containers: every address, the key still needed
    qtbot.waitUntil(lambda: sharing.state == "on", timeout=60000)
    assert sharing.server.server.config.host == "0.0.0.0" and settings.sharing_everywhere
    assert sharing.address == f"http://{socket.gethostname()}:{settings.sharing_port}/v1"
    local_address = f"http://127.0.0.1:{settings.sharing_port}/v1"
    assert _get(f"{local_address}/models", None)[0] == 401
    assert _get(f"{local_address}/models", settings.sharing_key)[0] == 200
    dialog.everywhere.setChecked(False)
    qtbot.waitUntil(lambda: sharing.state == "on", timeout=60000)
    assert sharing.server.server.config.host == "127.0.0.1"
    address = sharing.address
    dialog.switch.setChecked(False)  # the switch in the window turns it off
    assert sharing.state == "off" and dialog.status.text() == "Off."
    with pytest.raises(urllib.error.URLError):
        _get(f"{address}/models", settings.sharing_key)


def test_a_port_in_use_is_one_line_and_the_app_goes_on(qtbot, make_window, demo_bundle, settings):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings.sharing_port = taken.getsockname()[1]
        window = make_window(model=False, voice=False, open_synth=open_synthesizer)
        with qtbot.waitSignal(window.ctx.model_changed, timeout=60000):
            window.open_model(demo_bundle)
        qtbot.waitUntil(lambda: window.ctx.job is None, timeout=60000)
        window.sharing.set_enabled(True)
        qtbot.waitUntil(lambda: window.sharing.state == "off", timeout=60000)
        assert "Cannot listen" in window.sharing.problem and "\n" not in window.sharing.problem


def _open_demo(qtbot, make_window, demo_bundle, open_synth=open_synthesizer):
    window = make_window(model=False, voice=False, open_synth=open_synth)
    with qtbot.waitSignal(window.ctx.model_changed, timeout=60000):
        window.open_model(demo_bundle)
    qtbot.waitUntil(lambda: window.ctx.job is None, timeout=60000)
    synth = window.ctx.synth
    window.ctx.library.add(Voice(xvector=np.ones(synth.hidden_size, np.float32), model_id=synth.model_id,
                                 name="Shared voice"))
    window.ctx.voices_changed.emit()  # the window's voice column selects it
    return window


def test_the_switch_speaks_with_the_open_model_not_a_second_copy(qtbot, make_window, demo_bundle, settings,
                                                                monkeypatch):
    """A full-size model is gigabytes: the server uses the one the window has open, through every restart."""
    from engine.synthesis.synthesizer import Synthesizer

    loaded: list[object] = []
    real_init = Synthesizer.__init__

    def counted(self, *args, **kwargs):
        loaded.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Synthesizer, "__init__", counted)
    settings.sharing_port = _free_port()
    window = _open_demo(qtbot, make_window, demo_bundle)
    assert loaded == [window.ctx.synth]
    sharing = window.sharing
    sharing.set_enabled(True)
    qtbot.waitUntil(lambda: sharing.state == "on", timeout=60000)
    assert sharing.server.server.synth is window.ctx.synth
    assert sharing.server.server.queue.turns is window.ctx.engine_turns
    sharing.new_key()  # a restart: still the same model
    qtbot.waitUntil(lambda: sharing.state == "on", timeout=60000)
    assert sharing.server.server.synth is window.ctx.synth
    status, body = _post_speech(sharing.address, settings.sharing_key, {"input": "Hello.", "voice": "Shared voice",
                                                                        "response_format": "pcm", "max_frames": 8})
    assert status == 200 and len(body) > 0
    assert loaded == [window.ctx.synth]  # no second Synthesizer, not even to speak
    sharing.set_enabled(False)


def _post_speech(address: str, key: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(f"{address}/audio/speech", data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_the_apps_job_waits_its_turn_on_its_own_thread_and_can_be_cancelled(qtbot, make_window):
    """While the server holds the model, Generate returns at once and the window stays live; the job runs when the
    turn comes, or stops at Cancel without ever touching the model."""
    import threading
    import time

    window = make_window()
    turns = window.ctx.engine_turns
    held, release = threading.Event(), threading.Event()

    def server_request() -> None:  # the speech server's engine thread, generating
        with turns.turn():
            held.set()
            release.wait(30)

    threading.Thread(target=server_request, daemon=True).start()
    assert held.wait(5)
    window.text_edit.setPlainText("Waiting for my turn.")
    t0 = time.monotonic()
    assert window.generate()
    assert time.monotonic() - t0 < 1.0  # the window did not wait
    qtbot.waitUntil(lambda: "another app" in window.statusBar().currentMessage(), timeout=5000)
    qtbot.wait(300)
    assert window.synth_worker is not None and window.output.current is None  # still waiting, nothing made
    release.set()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=20000)
    assert window.output.current is not None and len(window.output.current.audio) > 0

    release.clear()
    held.clear()
    threading.Thread(target=server_request, daemon=True).start()
    assert held.wait(5)
    assert window.generate()
    qtbot.waitUntil(lambda: turns.waiting == 1, timeout=5000)
    window.cancel_generation()
    qtbot.waitUntil(lambda: window.synth_worker is None, timeout=5000)  # cancelled while the server still holds it
    assert turns.waiting == 0
    release.set()


def test_a_request_and_the_apps_generation_never_step_the_model_at_once(qtbot, make_window, demo_bundle,
                                                                        settings):
    """The real model, a request sent while the window generates: both get their audio, and no two threads are
    ever inside the model's synthesis at the same moment."""
    import threading

    settings.sharing_port = _free_port()
    window = _open_demo(qtbot, make_window, demo_bundle)
    synth = window.ctx.synth
    inside: dict[int, int] = {}  # thread -> depth inside synthesize's steps
    overlaps: list[set[int]] = []
    threads_seen: set[int] = set()
    guard = threading.Lock()
    real_synthesize = synth.synthesize

    def step(delta: int) -> None:
        me = threading.get_ident()
        with guard:
            inside[me] = inside.get(me, 0) + delta
            busy = {t for t, depth in inside.items() if depth > 0}
            threads_seen.add(me)
            if len(busy) > 1:
                overlaps.append(busy)

    def watched(*args, **kwargs):
        events = real_synthesize(*args, **kwargs)

        def steps():
            try:
                while True:
                    step(+1)
                    try:
                        event = next(events)
                    except StopIteration:
                        return
                    finally:
                        step(-1)
                    yield event
            finally:
                events.close()

        return steps()

    synth.synthesize = watched  # the instance's own: speak() and the server reach synthesis through it
    sharing = window.sharing
    sharing.set_enabled(True)
    qtbot.waitUntil(lambda: sharing.state == "on", timeout=60000)
    answers: list[tuple[int, bytes]] = []
    sender = threading.Thread(target=lambda: answers.append(_post_speech(
        sharing.address, settings.sharing_key, {"input": "A request from another app, while the window speaks.",
                                                "voice": "Shared voice", "response_format": "pcm", "max_frames": 40,
                                                "seed": 3})))
    window.settings_box.max_frames.setValue(40)
    window.text_edit.setPlainText("The window speaks this line while a request comes in.")
    sender.start()
    assert window.generate()
    qtbot.waitUntil(lambda: window.synth_worker is None and not sender.is_alive(), timeout=120000)
    assert answers and answers[0][0] == 200 and len(answers[0][1]) > 0
    assert window.output.current is not None and len(window.output.current.audio) > 0
    assert len(threads_seen) >= 2 and not overlaps
    sharing.set_enabled(False)


def test_turning_sharing_off_while_the_app_holds_the_model_does_not_wait_for_it(qtbot, make_window, demo_bundle,
                                                                              settings):
    """A request waits for its turn while the app's job holds the model; turning the switch off then ends at once
    (the request is told the server is stopping) instead of waiting behind the app's take."""
    import threading
    import time

    settings.sharing_port = _free_port()
    window = _open_demo(qtbot, make_window, demo_bundle)
    sharing = window.sharing
    sharing.set_enabled(True)
    qtbot.waitUntil(lambda: sharing.state == "on", timeout=60000)
    queue = sharing.server.server.queue
    held, release = threading.Event(), threading.Event()

    def app_job() -> None:  # the window's take, holding the model
        with window.ctx.engine_turns.turn():
            held.set()
            release.wait(60)

    threading.Thread(target=app_job, daemon=True).start()
    assert held.wait(5)
    answers: list[tuple[int, bytes]] = []
    sender = threading.Thread(target=lambda: answers.append(_post_speech(
        sharing.address, settings.sharing_key, {"input": "Waiting.", "voice": "Shared voice", "max_frames": 8})))
    sender.start()
    qtbot.waitUntil(lambda: window.ctx.engine_turns.waiting == 1, timeout=10000)  # the server's turn, asked for
    assert queue.running == 1
    t0 = time.monotonic()
    sharing.set_enabled(False)
    assert time.monotonic() - t0 < 3.0 and window.ctx.engine_turns.waiting == 0
    sender.join(10)
    release.set()
    assert answers and answers[0][0] == 503 and json.loads(answers[0][1])["error"]["message"]
