"""How long can the GUI thread not react while the app generates? A QTimer heartbeat measures the gaps.

The real main window, driven through its public methods only, runs what a user runs:
  generate  one text with streaming audio on (a fake audio device plays in real time on its own thread, the way
            PortAudio calls back), the token view and the waveform growing frame by frame;
  long      a text of several paragraphs, spoken in chunks (the long-text worker), streaming too;
  batch     several lines on the Batch tab (files written to a temporary folder);
  recording (not by default) a chapter-long recording growing in the take view, fed with noise without a model.
A PreciseTimer on the GUI thread records when it actually fires; the longest gap minus its interval is the
longest time a click or a repaint would have waited. An idle run first shows what the machine alone costs.
Figures are printed, nothing is asserted. Anything over 50 ms is a defect: --profile lists what ran on the GUI
thread (cProfile of the GUI thread; profiling slows Python, so rank with it, do not add up).

    python benchmarks/gui_stall.py                            # a fresh demo bundle
    python benchmarks/gui_stall.py --model BUNDLE --frames 60 # e.g. a full-size 0.6B q8 bundle
    python benchmarks/gui_stall.py --frames 4 --long-chunks 2 --batch-lines 2   # a smoke run (two runs each)
"""

from __future__ import annotations

import argparse
import cProfile
import faulthandler
import gc
import os
import pstats
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QElapsedTimer, QEventLoop, QSettings, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from engine import SAMPLE_RATE, SAMPLES_PER_FRAME, AudioChunk, cpu_model, load_average  # noqa: E402
from qwen3tts_gui.app import configure_runtime, load_style_sheet  # noqa: E402
from qwen3tts_gui.audio_io import AudioUnavailable  # noqa: E402
from qwen3tts_gui.context import AppContext, Dialogs  # noqa: E402
from qwen3tts_gui.data.settings import Settings  # noqa: E402
from qwen3tts_gui.data.voices import VoiceLibrary  # noqa: E402
from qwen3tts_gui.engine_adapter import make_demo_bundle, open_synthesizer  # noqa: E402
from qwen3tts_gui.main_window import MainWindow  # noqa: E402

TEXT = ("The old lighthouse stood at the edge of the cliff, and every evening the keeper climbed its stairs to "
        "light the lamp. Ships passed far out at sea, and nobody knew his name.")
SENTENCES = ["The storm came in from the west just after dark.", "Rain hammered the windows of the small house.",
             "Nobody in the village had seen waves like these before.", "By morning the harbour wall was gone.",
             "The fishermen stood on the hill and watched the sea.", "Then, slowly, they began to rebuild it."]
DEFECT_MS = 50.0  # a stall a user notices (a click, a key, a repaint waiting this long)


class RealTimeStream:
    """An output stream that asks for blocks at the device's pace on its own thread, as PortAudio does."""

    BLOCK = 1024

    def __init__(self, samplerate: int, fill):
        self.samplerate, self.fill = samplerate, fill
        self._run = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._run.set()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        buf = np.zeros(self.BLOCK, np.float32)
        next_at = time.monotonic()
        while self._run.is_set() and self.fill(buf):
            next_at += self.BLOCK / self.samplerate
            time.sleep(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._run.clear()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2)

    close = stop


class FakeSpeaker:
    """An audio device with an output and no microphone (the app's AudioBackend interface)."""

    def output_problem(self):
        return None

    def output_rate(self, wanted: int) -> int:
        return wanted

    def input_problem(self):
        return "no microphone in this benchmark"

    def input_samplerate(self) -> int:
        return 48000

    def open_output(self, samplerate: int, fill) -> RealTimeStream:
        return RealTimeStream(samplerate, fill)

    def open_input(self, samplerate: int, consume):
        raise AudioUnavailable(self.input_problem())


class ErrorsToStderr(Dialogs):
    """Messages go to stderr and every question is answered (yes; the first choice, which is the one that runs the
    work again; a file or folder asked for is not given), so no modal box waits for a human. Every method of
    Dialogs is answered here: check_answers_every_dialog stops the benchmark at once if one is not (a box
    offscreen, where no one can press a button, waited for ever: the second batch run asked which lines to run)."""

    def error(self, parent, title, text):
        print(f"[{title}] {text}", file=sys.stderr)

    info = notice = error

    def question(self, parent, title, text):
        return True

    def choose(self, parent, title, text, choices):
        print(f"[{title}] {text} -> {choices[0]}", file=sys.stderr)
        return 0

    def open_file(self, parent, caption, folder, filters):
        return ""

    save_file = open_file

    def open_dir(self, parent, caption, folder):
        return ""

    def get_text(self, parent, title, label, text=""):
        return None


def check_answers_every_dialog(dialogs: type[Dialogs]) -> None:
    """SystemExit naming any Dialogs method `dialogs` leaves to Qt (it would wait on a box no one can press)."""
    asked = {name for name, value in vars(Dialogs).items() if callable(value) and not name.startswith("_")}
    unanswered = sorted(name for name in asked if getattr(dialogs, name) is getattr(Dialogs, name))
    if unanswered:
        raise SystemExit(f"{dialogs.__name__} leaves {', '.join(unanswered)} to a dialog box: a benchmark never "
                         "waits on one")


def pump(app: QApplication, done, timeout: float) -> None:
    """Run the event loop (sleeping between events, as app.exec() does) until done() or the timeout. A loop of
    processEvents() calls would keep the GUI thread busy and compete with the engine for the CPU."""
    if done():
        return
    loop = QEventLoop()
    end = time.monotonic() + timeout
    check = QTimer()
    check.setInterval(20)
    check.timeout.connect(lambda: loop.quit() if done() or time.monotonic() > end else None)
    check.start()
    loop.exec()
    check.stop()
    if not done():
        raise TimeoutError("the app did not finish in time")


class CollectorClock:
    """The longest pause of Python's garbage collector (it stops every thread that runs Python, the GUI's too)."""

    def __init__(self) -> None:
        self.longest = (0.0, -1)  # ms, generation
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started:
            ms = (time.perf_counter() - self._started) * 1000
            if ms > self.longest[0]:
                self.longest = (ms, info.get("generation", -1))

    def take(self) -> tuple[float, int]:
        longest, self.longest = self.longest, (0.0, -1)
        return longest


def run_and_wait_ns() -> tuple[int, int]:
    """The calling thread's CPU time and its time spent runnable but waiting for a CPU (Linux schedstat; the
    wait reads 0 elsewhere). What is left of a gap is time blocked: on the GIL, a lock, or a slow system call."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            cpu, wait = f.read().split()[:2]
        return int(cpu), int(wait)
    except (OSError, ValueError):
        return time.thread_time_ns(), 0


class Heartbeat:
    """A PreciseTimer on the GUI thread; gaps() are the times between its firings, in ms."""

    def __init__(self, interval_ms: int):
        self.interval_ms = interval_ms
        self.ticks: list[int] = []
        self.stacks = None  # a file: where a late beat's stacks go (faulthandler's own thread writes them)
        self.armed = -(10**12)
        self.cpu: list[tuple[int, int]] = []  # the GUI thread's CPU time and CPU wait at each beat
        self.clock = QElapsedTimer()
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._beat)

    def _beat(self) -> None:
        now = self.clock.nsecsElapsed()
        if self.stacks is not None and now - self.armed > 20e6:
            # re-armed every 20 ms, not at every beat (one re-arm costs the GUI thread about 2 ms): no beat for
            # 50-70 ms and the interpreter's own watchdog thread writes every thread's stack
            faulthandler.dump_traceback_later((DEFECT_MS + 20) / 1000, file=self.stacks)
            self.armed = now
        self.ticks.append(now)
        self.cpu.append(run_and_wait_ns())

    def __enter__(self) -> Heartbeat:
        self.clock.start()
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.stop()
        if self.stacks is not None:
            faulthandler.cancel_dump_traceback_later()

    def gaps(self) -> np.ndarray:
        return np.diff(np.array(self.ticks, np.int64)) / 1e6 if len(self.ticks) > 1 else np.zeros(1)

    def split(self) -> tuple[np.ndarray, np.ndarray]:
        """Per gap, in ms: the GUI thread's own CPU time (its work) and its time waiting for a CPU (the machine's
        other threads and programs had it)."""
        if len(self.cpu) < 2:
            return np.zeros(1), np.zeros(1)
        d = np.diff(np.array(self.cpu, np.int64), axis=0) / 1e6
        return d[:, 0], d[:, 1]

    def report(self, label: str, verbose: bool) -> tuple[float, float]:
        """Prints the gaps; returns the longest stall and the most GUI-thread work in one gap (ms)."""
        gaps, (busy, waited) = self.gaps(), self.split()
        i = int(np.argmax(gaps))
        stall = float(gaps[i]) - self.interval_ms
        print(f"{label}: heartbeat gaps median {np.median(gaps):.1f} ms, p99 {np.percentile(gaps, 99):.1f} ms, "
              f"longest stall {stall:.1f} ms (GUI thread working {busy[i]:.1f} ms, waiting for a CPU "
              f"{waited[i]:.1f} ms, blocked {gaps[i] - busy[i] - waited[i]:.1f} ms); most GUI work between beats "
              f"{busy.max():.1f} ms; gaps > {DEFECT_MS:.0f} ms: {int((gaps > DEFECT_MS).sum())}")
        if verbose:
            ends = np.array(self.ticks[1:], np.int64) / 1e9
            for j in np.flatnonzero(gaps > DEFECT_MS):
                print(f"    gap {gaps[j]:.1f} ms (working {busy[j]:.1f}, waiting for a CPU {waited[j]:.1f}, blocked "
                      f"{gaps[j] - busy[j] - waited[j]:.1f}) ending {ends[j]:.3f} s after the start")
        return stall, float(busy.max())


def stream_recording(app: QApplication, window: MainWindow, minutes: float) -> int:
    """A long recording growing in the take view as a chapter's chunks would arrive, without generating it: the
    output panel gets 4-frame chunks of noise through its streaming methods, one every 10 ms (the whole recording
    in a few tens of seconds; a real model sends one every few hundred ms)."""
    chunk = 4 * SAMPLES_PER_FRAME
    total = int(minutes * 60 * SAMPLE_RATE) // chunk
    noise = (np.random.default_rng(0).standard_normal(chunk) * 0.2).astype(np.float32)
    window.output.begin_stream(total * 4)
    sent = [0]

    def send() -> None:
        if sent[0] < total:
            window.output.add_chunk(AudioChunk(noise, sent[0] * chunk))
            sent[0] += 1

    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(send)
    timer.start()
    pump(app, lambda: sent[0] >= total, 600)
    timer.stop()
    streamed = len(window.output.wave.samples)
    window.output.end_stream(None)
    return streamed


def reference_voice(seconds: float = 5.0) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(0)
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    ref = 0.3 * np.sin(2 * np.pi * 150 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return (ref + 0.003 * rng.standard_normal(len(t))).astype(np.float32), SAMPLE_RATE


def build_window(tmp: Path, model: Path, app: QApplication) -> MainWindow:
    check_answers_every_dialog(ErrorsToStderr)
    settings = Settings(QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat))
    settings.batch_dir = str(tmp / "batch")
    ctx = AppContext(settings, FakeSpeaker(), ErrorsToStderr(), open_synth=open_synthesizer,
                     library=VoiceLibrary(tmp / "voices"))
    window = MainWindow(ctx, takes_folder=tmp / "takes")
    window.resize(1280, 860)
    window.show()
    t0 = time.perf_counter()
    if not window.open_model(model):
        raise SystemExit(f"cannot open {model}")
    pump(app, lambda: ctx.busy is None, 3600)
    if ctx.synth is None:
        raise SystemExit(f"cannot open {model}")
    print(f"model {model} opened in {time.perf_counter() - t0:.1f} s (Qt platform {app.platformName()})")
    ctx.library.add(ctx.synth.create_voice(reference_voice(), name="bench"))
    window.voice_panel.refresh()
    return window


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="bundle (default: a fresh demo bundle)")
    ap.add_argument("--frames", type=int, default=100, help="frames per generation (per chunk or line) at most")
    ap.add_argument("--scenarios", default="generate,long,batch")
    ap.add_argument("--long-chunks", type=int, default=4, help="paragraphs of the long text (one chunk each)")
    ap.add_argument("--batch-lines", type=int, default=4)
    ap.add_argument("--recording-minutes", type=float, default=10.0, help="length of the 'recording' scenario")
    ap.add_argument("--interval-ms", type=int, default=5)
    ap.add_argument("--idle-seconds", type=float, default=2.0, help="length of the idle baseline")
    ap.add_argument("--no-stream", action="store_true", help="do not decode audio while generating")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each scenario (a shared machine is noisy)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stacks", type=Path, help="write every thread's stack here whenever the GUI thread has not "
                    "reacted for 50-70 ms (it costs the GUI thread time: to find causes, not for figures)")
    ap.add_argument("--profile", action="store_true", help="cProfile the GUI thread and list its largest costs")
    ap.add_argument("--verbose", action="store_true", help="list every gap over 50 ms")
    args = ap.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(scenarios) - {"generate", "long", "batch", "recording"}
    if unknown:
        ap.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")

    tmp = Path(tempfile.mkdtemp(prefix="qwen3tts-gui-stall-"))
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        os.environ[name] = str(tmp / name.lower())  # the app's text, batch lines and takes stay out of the user's
    # (the cache folder is kept: a model's self-tuned settings are measured once, not at every run)
    try:
        return run(args, scenarios, tmp)
    finally:
        shutil.rmtree(tmp, True)


def run(args, scenarios: list[str], tmp: Path) -> int:
    model = args.model or make_demo_bundle(tmp / "demo")
    configure_runtime()  # exactly what the app's main() does
    app = QApplication([sys.argv[0]])
    app.setStyle("Fusion")
    app.setStyleSheet(load_style_sheet())
    window = build_window(tmp, model, app)
    ctx, box = window.ctx, window.settings_box
    box.seed_random.setChecked(False)
    box.seed.setValue(args.seed)
    box.max_frames.setValue(args.frames)
    box.stream_audio.setChecked(not args.no_stream)
    print(f"CPU {cpu_model()}, load average {load_average()}; "
          f"at most {args.frames} frames per generation, streaming audio {'off' if args.no_stream else 'on'}")

    with Heartbeat(args.interval_ms) as idle:
        end = time.monotonic() + args.idle_seconds
        pump(app, lambda: time.monotonic() > end, args.idle_seconds + 10)
    idle_stall, _ = idle.report(f"idle ({args.idle_seconds:g} s)", args.verbose)

    long_text = "\n\n".join(SENTENCES[i % len(SENTENCES)] for i in range(max(2, args.long_chunks)))
    lines = [(SENTENCES[i % len(SENTENCES)], "", "english") for i in range(args.batch_lines)]

    window.batch.add_rows(lines)

    streamed = [0]

    def start(scenario: str) -> bool:
        if scenario == "batch":
            return window.batch.run_all()
        if scenario == "recording":
            streamed[0] = stream_recording(app, window, args.recording_minutes)
            return True
        return window.generate(TEXT if scenario == "generate" else long_text)

    profile = cProfile.Profile() if args.profile else None
    stacks = open(args.stacks, "w") if args.stacks else None  # noqa: SIM115  (closed at exit)
    collector = CollectorClock()
    for scenario in scenarios:
        runs: list[tuple[float, float]] = []
        for i in range(args.repeat):
            beat = Heartbeat(args.interval_ms)
            beat.stacks = stacks
            if stacks is not None:
                print(f"=== {scenario} run {i + 1}", file=stacks, flush=True)
            with beat:
                started = time.perf_counter()
                if profile is not None:
                    profile.enable()
                if not start(scenario):
                    raise SystemExit(f"{scenario}: the app refused to start")
                pump(app, lambda: ctx.busy is None, 3600)  # (a recording has already ended)
                if profile is not None:
                    profile.disable()
                wall = time.perf_counter() - started
            if scenario == "recording":
                made = f"{streamed[0] / SAMPLE_RATE / 60:.1f} minutes streamed"
            elif scenario == "batch":
                made = f"{len(list(Path(ctx.settings.batch_dir).glob('*.wav')))} files in the batch folder"
            else:
                take = window.output.current
                made = f"a take of {take.result.seconds:.1f} s" if take is not None else "no take"
            gc_ms, gc_gen = collector.take()
            made += f"; longest garbage collection {gc_ms:.1f} ms (generation {gc_gen})"
            runs.append(beat.report(f"{scenario} run {i + 1} ({wall:.1f} s, {made})", args.verbose))
        walls, works = [r[0] for r in runs], [r[1] for r in runs]
        print(f"RESULT {scenario}: longest GUI-thread stall {max(walls):.1f} ms over {len(runs)} run(s), "
              f"median {np.median(walls):.1f} ms; most GUI-thread work in one gap {max(works):.1f} ms")
    window.close()
    print(f"load average after: {load_average()}; idle stall on this machine {idle_stall:.1f} ms")
    if profile is not None:
        print("\nGUI thread, largest own times (cProfile):")
        pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
