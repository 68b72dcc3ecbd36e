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
