"""Voice panel: recording from the fake device, each reference format, bad files, and the voice library."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from qwen3tts_gui.engine_adapter import Voice

from .fakes import FakeAudioBackend, speech_like


def _no_traceback(dialogs):
    for _title, text in dialogs.errors:
        assert "Traceback" not in text and "\n" not in text


def test_record_from_fake_device_and_create_voice(qtbot, make_window, audio, dialogs, fake_synth):
    window = make_window(voice=False)
    panel = window.voice_panel
    assert panel.library.list.count() == 0
    levels = []
    panel.editor.recorder.level.connect(levels.append)
    panel.toggle_record()
    assert panel.editor.recorder.recording and panel.editor.rec_row.isVisible()
    qtbot.waitUntil(lambda: panel.editor.recorder._count >= 48000 * 4.3, timeout=10000)  # 4.3 s at 4x speed
    panel.toggle_record()
    assert not panel.editor.recorder.recording
    assert not dialogs.errors
    assert max(levels) > -20  # the meter saw the signal
    samples, sr = panel.editor.reference()
    assert sr == 48000 and len(samples) >= 48000 * 4.3
    a, b = panel.editor.ref_wave.selected_samples()
    assert 0.3 * sr < a < 0.7 * sr  # the leading silence is suggested for trimming
    assert b < len(samples)
    assert panel.editor.coach.notes and not panel.editor.coach.has_blocking_problem()
    panel.editor.name_edit.setText("Mic voice")
    panel.editor.transcript.setPlainText("Hello from the microphone.")
    panel.editor.create_voice()
    qtbot.waitUntil(lambda: panel.library.list.count() == 1, timeout=5000)
    entry = panel.selected_entry()
    assert entry.name == "Mic voice" and entry.icl
    assert not panel.editor.is_open()


def test_recording_refused_and_no_microphone(qtbot, make_window, dialogs):
    window = make_window(backend=FakeAudioBackend(refuse_input=True))
    panel = window.voice_panel
    panel.toggle_record()
    assert not panel.editor.recorder.recording
    assert "permission denied" in dialogs.errors[-1][1]
    assert "permission denied" in panel.editor.record_btn.toolTip()
    _no_traceback(dialogs)


@pytest.mark.parametrize("suffix,subtype", [(".wav", "PCM_16"), (".wav", "FLOAT"), (".flac", None), (".ogg", None),
                                            (".mp3", None)])
def test_load_each_reference_format(qtbot, make_window, dialogs, tmp_path, suffix, subtype):
    window = make_window()
    panel = window.voice_panel
    sr = 44100
    stereo = np.stack([speech_like(4.0, sr), 0.5 * speech_like(4.0, sr)], axis=1)
    path = tmp_path / f"ref{suffix}"
    kwargs = {"subtype": subtype} if subtype else {}
    sf.write(path, stereo, sr, **kwargs)
    dialogs.files.append(str(path))
    panel.choose_reference_file()
    assert not dialogs.errors, dialogs.errors
    samples, got_sr = panel.editor.reference()
    assert got_sr == sr
    assert abs(len(samples) - 4.0 * sr) < 0.1 * sr  # mp3 adds a little padding
    assert panel.editor.is_open() and panel.editor.name_edit.text() == "ref"
    assert len(panel.editor.ref_wave.samples) == len(samples)
    assert any("Length 4.0 s" in n.text or "Length 3.9 s" in n.text for n in panel.editor.coach.notes)
    # trimmed: the selected part goes to the engine as (samples, rate)
    panel.editor.ref_wave.set_selection(sr, 3 * sr)
    panel.editor.create_voice()
    qtbot.waitUntil(lambda: window.ctx.busy is None, timeout=5000)
    assert not dialogs.errors


def test_untrimmed_file_goes_to_the_engine_by_path(qtbot, make_window, dialogs, tmp_path, fake_synth):
    window = make_window()
    seen = []
    original = fake_synth.create_voice
    fake_synth.create_voice = lambda audio, **kw: seen.append(audio) or original(audio, **kw)
    path = tmp_path / "whole.wav"
    sf.write(path, speech_like(4.0, 16000), 16000)
    assert window.voice_panel.load_reference_file(path)
    window.voice_panel.editor.create_voice()
    qtbot.waitUntil(lambda: window.ctx.busy is None, timeout=5000)
    assert seen == [path]


def test_bad_reference_files_show_a_message(qtbot, make_window, dialogs, tmp_path):
    window = make_window()
    panel = window.voice_panel
    corrupt = tmp_path / "corrupt.wav"
    corrupt.write_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt garbage" + bytes(range(256)) * 4)
    text = tmp_path / "notes.mp3"
    text.write_text("this is not audio")
    for bad in (corrupt, text, tmp_path / "missing.flac", tmp_path):
        assert not panel.load_reference_file(bad)
        title, msg = dialogs.errors[-1]
        assert title == "Cannot use this file" and msg
    assert len(dialogs.errors) == 4
    assert not panel.editor.is_open()
    _no_traceback(dialogs)


def test_silent_reference_is_refused_by_the_engine(qtbot, make_window, dialogs, tmp_path):
    window = make_window()
    path = tmp_path / "silence.wav"
    sf.write(path, np.zeros(48000, np.float32), 16000)
    assert window.voice_panel.load_reference_file(path)
    assert window.voice_panel.editor.coach.has_blocking_problem()
    window.voice_panel.editor.create_voice()
    qtbot.waitUntil(lambda: window.ctx.busy is None, timeout=5000)
    assert dialogs.errors[-1] == ("Cannot create the voice", "The reference is silent.")


def test_library_rename_delete_export_import(qtbot, make_window, dialogs, tmp_path):
    window = make_window()
    panel = window.voice_panel
    assert panel.library.list.count() == 1
    dialogs.texts.append("Renamed voice")
    panel.library.rename_selected()
    assert panel.selected_entry().name == "Renamed voice"
    assert panel.selected_entry().path.name == "Renamed voice.qvoice"
    out = tmp_path / "exported.qvoice"
    dialogs.files.append(str(out))
    panel.export_selected()
    assert Voice.load(out).name == "Renamed voice"
    dialogs.answer = True
    panel.library.delete_selected()
    assert panel.library.list.count() == 0
    dialogs.files.append(str(out))
    panel.import_voice()
    assert panel.library.list.count() == 1 and panel.selected_entry().name == "Renamed voice"
    # a damaged voice file is refused with its one line
    bad = tmp_path / "bad.qvoice"
    bad.write_bytes(b"not a zip")
    dialogs.files.append(str(bad))
    panel.import_voice()
    assert dialogs.errors[-1][0] == "Cannot import voice" and "not a readable voice file" in dialogs.errors[-1][1]
    _no_traceback(dialogs)


def test_voice_from_another_model_is_made_again(qtbot, make_window, dialogs, fake_synth, tmp_path):
    window = make_window()
    panel = window.voice_panel
    foreign = fake_synth.create_voice((speech_like(4.0, 24000), 24000), ref_text="Hi there.", name="Foreign")
    foreign.model_id = "another-model"
    path = window.ctx.library.add(foreign)
    bare = fake_synth.create_voice((speech_like(4.0, 24000), 24000), name="No reference")
    bare.model_id, bare.ref_audio = "another-model", None
    window.ctx.library.add(bare)
    panel.refresh()
    window.text_edit.setPlainText("Hello")

    panel.library.list.setCurrentRow(panel.voice_names().index("No reference"))
    assert not window.generate()
    assert "different model" in dialogs.errors[-1][1]

    panel.library.list.setCurrentRow(panel.voice_names().index("Foreign"))
    dialogs.answer = False
    assert not window.generate()
    assert dialogs.questions[-1][0] == "Voice from another model"
    dialogs.answer = True
    assert not window.generate()  # makes the voice again first, then speaks: no second press of Generate
    assert "Then it speaks" in dialogs.questions[-1][1]
    qtbot.waitUntil(lambda: window.output.current is not None and window.ctx.job is None, timeout=10000)
    remade = Voice.load(path)
    assert remade.model_id == fake_synth.model_id and remade.name == "Foreign" and remade.ref_text == "Hi there."
    assert panel.selected_entry().path == path
    take = window.output.current
    assert take.text == "Hello" and take.voice_name == "Foreign" and len(fake_synth.calls) == 1


class _Drop:
    def __init__(self, path):
        from PySide6.QtCore import QMimeData, QUrl

        self._mime = QMimeData()
        self._mime.setUrls([QUrl.fromLocalFile(str(path))])
        self.accepted = False

    def mimeData(self):
        return self._mime

    def acceptProposedAction(self):
        self.accepted = True


def test_drop_audio_and_voice_files(qtbot, make_window, dialogs, tmp_path, fake_synth):
    window = make_window(voice=False)
    panel = window.voice_panel
    wav = tmp_path / "dropped voice.wav"
    sf.write(wav, speech_like(4.0, 22050), 22050)
    event = _Drop(wav)
    panel.dragEnterEvent(event)
    assert event.accepted
    panel.dropEvent(_Drop(wav))
    assert panel.editor.reference() is not None and panel.editor.name_edit.text() == "dropped voice"
    exported = tmp_path / "shared.qvoice"
    fake_synth.create_voice((speech_like(4.0, 24000), 24000), name="Shared").save(exported)
    panel.dropEvent(_Drop(exported))
    assert panel.voice_names() == ["Shared"]
    assert not dialogs.errors


def test_changing_the_voices_folder(qtbot, make_window, dialogs, tmp_path, settings):
    from qwen3tts_gui.widgets.folders_dialog import FoldersDialog

    window = make_window()
    assert window.voice_panel.library.list.count() == 1
    dialog = FoldersDialog(window.ctx, window)
    dialog.voices.setText(str(tmp_path / "other voices"))
    dialog.models.setText(str(tmp_path / "models"))
    dialog.accept()
    assert window.voice_panel.library.list.count() == 0
    assert settings.voices_dir == str(tmp_path / "other voices")
    assert window.ctx.models_folder() == tmp_path / "models"
