"""Audio written as it is made: a long recording goes to a temporary sibling file chunk by chunk, and only a
complete recording is renamed over the target (a crash, a cancel or a full disk leaves the target untouched)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import soundfile as sf

from ..codec_format import SAMPLE_RATE
from ..errors import AudioError
from .audio_formats import SAVE_FORMATS, SAVE_SUFFIX_WORDS
from .fileio import KeptCopyError, os_reason, place, rescue, target_of, temp_beside

FULL_BELOW_BYTES = 1 << 20  # less free space than this after a failed write: the disk is what failed


class AudioFileWriter:
    """Mono .wav/.flac/.ogg written incrementally. Use as a context manager, or call commit()/abort()."""

    def __init__(self, path: str | os.PathLike, sample_rate: int = SAMPLE_RATE, subtype: str | None = None):
        self.path = Path(path)
        fmt = SAVE_FORMATS.get(self.path.suffix.lower())
        if fmt is None:
            raise AudioError(f"Cannot save {self.path.name}: use a {SAVE_SUFFIX_WORDS} file name.")
        subtype = subtype or sf.default_subtype(fmt)
        if not sf.check_format(fmt, subtype):
            raise AudioError(f"Cannot save {self.path.name}: {fmt} files cannot hold {subtype} samples.")
        parent = self.path.parent if str(self.path.parent) else Path(".")
        if not parent.is_dir():
            raise AudioError(f"Cannot save {self.path.name}: the folder {parent} does not exist.")
        if self.path.is_dir():
            raise AudioError(f"Cannot save {self.path}: it is a folder.")
        self._clip = subtype.startswith("PCM") or subtype in ("ULAW", "ALAW")
        target = target_of(self.path)  # beside what a symlink points to, so the final rename stays in one folder
        fd, tmp = temp_beside(target)
        os.close(fd)
        self._tmp = Path(tmp)
        try:
            self._file = sf.SoundFile(tmp, "w", samplerate=int(sample_rate), channels=1, subtype=subtype, format=fmt)
        except (sf.LibsndfileError, sf.SoundFileRuntimeError, RuntimeError, ValueError) as e:
            self._tmp.unlink(missing_ok=True)
            raise AudioError(f"Cannot save {self.path.name}: {self._reason(e)}.") from None
        self.samples = 0
        self._open = True

    def write(self, samples: np.ndarray) -> None:
        a = np.asarray(samples, dtype=np.float32).reshape(-1)
        if not np.isfinite(a).all():
            raise AudioError(f"Cannot save {self.path.name}: the audio contains NaN or infinite samples.")
        if self._clip and a.size and (float(a.max()) > 1.0 or float(a.min()) < -1.0):
            a = np.clip(a, -1.0, 1.0)  # over-range samples saturate instead of wrapping around
        try:
            self._file.write(a)
        except (sf.LibsndfileError, sf.SoundFileRuntimeError, RuntimeError, OSError) as e:
            raise AudioError(f"Cannot save {self.path.name}: {self._reason(e)}.") from None
        self.samples += len(a)

    def commit(self) -> Path:
        """Finish the file and rename it over the target."""
        self._open = False
        try:
            self._file.close()
            with open(self._tmp, "rb+") as f:
                os.fsync(f.fileno())
        except (OSError, RuntimeError) as e:
            self._tmp.unlink(missing_ok=True)
            raise AudioError(f"Cannot save {self.path.name}: {self._reason(e)}.") from None
        try:
            place(self._tmp, self.path, discard=False)  # an existing file keeps its mode, owner and links
        except KeptCopyError as e:  # half rewritten in place; the error names the complete copy
            raise AudioError(f"Cannot save {self.path.name}: {os_reason(e)}.") from None
        except OSError as e:  # the recording is complete: keep it somewhere and say where
            kept = rescue(self._tmp, self.path.suffix)
            where = f" The audio was kept in {kept}." if kept else ""
            raise AudioError(f"Cannot save {self.path.name}: {os_reason(e)}.{where}") from None
        return self.path

    def _reason(self, e: Exception) -> str:
        """libsndfile says only "System error." when the disk fills up: look at the disk to say what happened."""
        if isinstance(e, OSError) and e.errno is not None:
            return os_reason(e)
        try:
            st = os.statvfs(self._tmp.parent)
            if st.f_bavail * st.f_frsize < FULL_BELOW_BYTES:
                return "the disk is full"
        except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
            pass
        return str(e).strip().rstrip(".") or type(e).__name__

    def abort(self) -> None:
        """Drop the partial file; the target is untouched."""
        if self._open:
            self._open = False
            try:
                self._file.close()
            except (RuntimeError, OSError):
                pass
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> AudioFileWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif self._open:
            self.commit()
