"""The CLI tunes a model the first time it is used on a computer (once; stored), not when --threads chose the
counts; `qwen3tts bench --tune` prints every candidate and the bandwidth accounting."""

from __future__ import annotations

from pathlib import Path

from qwen3tts_cli.main import main
from tests.bundles import bundle_for

REF = Path(__file__).resolve().parent / "fixtures" / "audio" / "en_24k_mono_2s.wav"


def synth(capsys, bundle, out, *extra):
    code = main(["synth", "--model", str(bundle), "--text", "Hello there.", "-o", str(out), "--greedy",
                 "--max-frames", "4", "--language", "english", "--ref", str(REF), "--x-vector-only", *extra])
    return code, capsys.readouterr().err


def test_first_synth_tunes_once(tmp_path, capsys, monkeypatch):
    import qwen3tts_cli.common

    cache = tmp_path / "cache"
    monkeypatch.setenv("QWEN3TTS_CACHE_DIR", str(cache))
    monkeypatch.setattr("os.getloadavg", lambda: (0.2, 0.2, 0.2))  # a quiet machine: the tuning is kept
    monkeypatch.setattr(qwen3tts_cli.common, "_terminal", lambda: True)  # the notes are for a terminal
    bundle = bundle_for("tiny06b", "q8")
    code, err = synth(capsys, bundle, tmp_path / "a.wav", "--threads", "1")
    assert code == 0 and "tuning" not in err and not (cache / "tuning").exists()  # --threads chose the counts
    code, err = synth(capsys, bundle, tmp_path / "b.wav")
    assert code == 0 and "tuning for this computer" in err and "Tuned for this computer in" in err
    assert len(list((cache / "tuning").glob("*.json"))) == 1
    code, err = synth(capsys, bundle, tmp_path / "c.wav")
    assert code == 0 and "tuning" not in err.lower()
    # a damaged record: said once, tuned again
    record = next((cache / "tuning").glob("*.json"))
    record.write_text("{")
    code, err = synth(capsys, bundle, tmp_path / "d.wav")
    assert code == 0 and "is not usable" in err and "Tuned for this computer in" in err


def test_bench_tune_prints_candidates_and_the_floor(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("QWEN3TTS_CACHE_DIR", str(tmp_path))
    assert main(["bench", "--model", str(bundle_for("tiny06b", "q8")), "--frames", "3", "--tune"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    chosen = [line for line in lines if line.endswith("chosen")]
    assert {line.split()[0] for line in chosen} >= {"talker", "code", "decoding"}
    assert any(line.startswith("memory        read bandwidth") for line in lines)
    floors = [line for line in lines if line.startswith("floor")]
    assert [f.split()[1] for f in floors] == ["talker", "code", "generation"]
    assert all("% of the read bandwidth" in f for f in floors)
    summary = [line for line in lines if line.startswith("summary")]
    assert len(summary) == 1 and "ms/frame" in summary[0] and "cores" in summary[0]


def test_off_a_terminal_tuning_says_nothing(tmp_path, capsys, monkeypatch):
    """A script's stderr keeps one line per problem: the tuning happens, silently."""
    monkeypatch.setenv("QWEN3TTS_CACHE_DIR", str(tmp_path))
    code, err = synth(capsys, bundle_for("tiny06b", "q8"), tmp_path / "a.wav")
    assert code == 0 and "tuning for this computer" not in err and "Tuned" not in err
    assert len(list((tmp_path / "tuning").glob("*.json"))) == 1
