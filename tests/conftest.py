import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Bundle checksum verification records go to a private folder, never the user's cache.
_CACHE = tempfile.mkdtemp(prefix="qwen3tts-test-cache-")
atexit.register(shutil.rmtree, _CACHE, True)
os.environ["QWEN3TTS_CACHE_DIR"] = _CACHE
FIXTURES = ROOT / "tests" / "fixtures"


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _other_programs_unknown(monkeypatch):
    """The thread governors read other programs' CPU use from /proc; in tests that is whatever else runs on the
    machine, so it reads as unknown (timings alone decide) unless a test injects a load of its own."""
    from engine.runtime import cpu_load

    monkeypatch.setattr(cpu_load, "_shared", cpu_load.CpuLoad(read=lambda: None))


@pytest.fixture(autouse=True)
def _spin_count_as_started(monkeypatch):
    """The self-tuner times OpenMP spin counts in processes of its own, each loading the model again: seconds per
    model, and figures of whatever else runs on the machine. Tests keep the count this process started with, as
    when the user sets GOMP_SPINCOUNT; tests of the spin stage set the setting they describe."""
    from engine.runtime import cpu

    monkeypatch.setattr(cpu, "_spin", cpu.SpinSetting(cpu.spin_setting().count, "user"))


@pytest.fixture
def tuning_cache(tmp_path, monkeypatch):
    """A cache folder of the test's own for tuning records, on a quiet machine (tests/tuning_stand_in.py)."""
    from tests.tuning_stand_in import quiet

    monkeypatch.setenv("QWEN3TTS_CACHE_DIR", str(tmp_path))
    quiet(monkeypatch)
    return tmp_path


@pytest.fixture(scope="module")
def tuning_q8():
    """The 8-bit bundle the self-tuner's tests tune (its int8 thread counts are what is tuned)."""
    from tests.bundles import bundle_for

    return bundle_for("tiny06b", "q8")
