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
