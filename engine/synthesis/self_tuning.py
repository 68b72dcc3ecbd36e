"""What the self-tuner times on a model, and how the chosen settings are put in place (engine/runtime/tuning.py
has the model-free part: alternating candidates, the choice, the stored record).

Four steps on real networks, each a share of the budget (15 s at full size on a quiet machine); the budget caps the
whole run by time: a stage that has no time left is skipped (its setting keeps its default) and candidates not
reached are never chosen:
1. generation: one frame per candidate thread count in turn (fewest first), talker step and code predictor timed
   apart and chosen apart. q8 bundles load their int8 matrix products at a fixed thread count, so each count is a
   net of its own, loaded for the run (the loser is dropped); float nets change their count per call;
1b. the OpenMP spin count (engine/synthesis/spin_tuning.py), where neither the user nor an earlier tuning on this
   CPU set it: the code predictor at every core, quiet and beside a competing load, per candidate count in a
   process of its own; the code predictor's thread count is then chosen at the chosen spin count, which applies
   from the next start;
2. decoder precision, only for bundles whose decoder can run bf16: a few frames decoded whole at fp32 and bf16
   (used where the caller asked for "auto");
3. decoding beside generation: frames generated and streamed with the decoder on its own thread at each thread
   count, and inline after each frame; timed per streamed frame, generation included.
Frames are generated from a random prompt with greedy choices (random weights give no meaningful codes, and the
time of a step does not depend on them). Nothing here changes a result: thread counts and overlap never change
numbers, and the decoder precision is only chosen where "auto" allows bf16.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import ncnn
import numpy as np

from ..errors import Cancelled
from ..nets.code_predictor import CodePredictor
from ..nets.codec_decoder import DECODER_PRECISIONS, CodecDecoder, decoder_net_precision, decoder_part
from ..nets.talker import Talker, talker_part
from ..runtime.bundle import FORMAT, FORMAT_VERSION, Bundle
from ..runtime.cpu import cpu_model, load_average, physical_cores, spin_setting, usable_cpus
from ..runtime.cpu_load import shared_cpu_load
from ..runtime.device import faster_gpu
from ..runtime.openmp import limited
from ..runtime.thread_governor import ThreadGovernor
from ..runtime.tuning import (
    CandidateFigure,
    Lookup,
    TunedSettings,
    TuningKey,
    TuningRecord,
    alternate,
    load_record,
    median,
    pick,
    save_record,
    thread_candidates,
    utc_now,
)
from ..types import Timings
from .gpu_timing import time_gpus
from .spin_tuning import Probe, choose_spin, spin_figures, spin_stage
from .streaming import StreamedAudio
from .tuning_frames import FrameSource

DEFAULT_BUDGET = 15.0  # seconds at full size on a quiet machine (fewer rounds on a slow or busy one)
STREAM_FRAMES = 4  # frames per streamed measurement: enough for the decoder thread to settle into its rhythm
DECODE_FRAMES = 4  # frames per whole-decode measurement of the decoder precision
Progress = Callable[[float, str], None]


def tuning_key(bundle: Bundle, device: str = "cpu") -> TuningKey:
    """The key a bundle's tuning is stored under: this CPU, ncnn, and the bundle's shape, precision and format.
    Read from the manifest and the CPU description only (no network is loaded)."""
    part = talker_part(bundle)
    listed = [bundle.listed_size(f"{g}.bin") for g in (part.talker_graph, part.cp_graph, decoder_part(bundle).graph)]
    sizes = "/".join("?" if size is None else str(size) for size in listed)
    model = (f"talker {part.talker.layers}x{part.talker.hidden}, code predictor "
             f"{part.code_predictor.layers}x{part.code_predictor.hidden}; weights {sizes}")
    marks = "bf16 decoder" if bf16_decoder_available(bundle) else "fp32 decoder"
    return TuningKey(cpu=cpu_model(), cores=physical_cores(), logical=usable_cpus(),
                     ncnn=str(getattr(ncnn, "__version__", "?")), model=model, precision=bundle.precision,
                     format=f"{FORMAT} v{FORMAT_VERSION}, 8-bit format "  # the only format and version that open
                            f"{'-' if bundle.q8_format is None else bundle.q8_format}, {marks}",
                     device=device)


def stored_tuning(bundle: Bundle) -> Lookup:
    """The tuning stored for this bundle on this computer, if any (with a note when a stored file was unusable)."""
    return load_record(tuning_key(bundle))


def bf16_decoder_available(bundle: Bundle) -> bool:
    return decoder_part(bundle).bf16_layers


@dataclass
class Parts:
    """The loaded networks the tuner times and changes (a Synthesizer hands its own over: Parts.of), so the
    tuner never reaches into the Synthesizer."""

    bundle: Bundle
    talker: Talker
    code_predictor: CodePredictor
    decoder: CodecDecoder
    overlap_decode: bool
    stream: Callable[[CodecDecoder, bool], Any]  # (decoder, overlap) -> an object with push(frame), finish(), close()
    adaptive_threads: bool = True
    cores: int = 1  # the thread governors' upper count
    include_software_gpus: bool = False  # time lavapipe and the like too (tests: it is the GPU they have)
    # what a measurement reports: (part, candidate, measured seconds) -> seconds; tests inject CPUs through it
    timing: Callable[[str, Any, float], float] = lambda part, candidate, seconds: seconds
    spare: dict[tuple[str, int], Any] = field(default_factory=dict)  # nets loaded for the run, by (part, threads)
    streaming_threads: int | None = None  # what apply_settings chose for generation while audio streams
    # (spin count, seconds it may take) -> its code predictor frames: tests inject CPUs through it; None: measured
    # (this process's count here, the others in processes of their own)
    spin_probe: Probe | None = None

    @classmethod
    def of(cls, bundle: Bundle, talker: Talker, code_predictor: CodePredictor, decoder: CodecDecoder,
           overlap_decode: bool, adaptive_threads: bool, cores: int) -> Parts:
        """A synthesizer's loaded networks, with streamed decoding as it does it."""
        return cls(bundle, talker, code_predictor, decoder, overlap_decode,
                   lambda decoder, overlap: StreamedAudio(decoder, None, Timings(), overlap),
                   adaptive_threads=adaptive_threads, cores=cores)


def run_tuning(parts: Parts, cores: int, budget: float = DEFAULT_BUDGET, decoder_request: str = "fp32",
               progress: Progress | None = None, cancel: Callable[[], bool] | None = None,
               clock: Callable[[], float] = time.monotonic, time_cap: float | None = None) -> TuningRecord:
    """Time the candidates and return the record. time_cap: seconds after which no measurement starts (default:
    the budget; tests give the tiny bundles' candidates more, so that every one is timed). Leaves every part as it found it; parts.spare keeps the nets
    loaded for the winners (apply_settings uses them instead of loading again). Cancelled propagates."""
    t0 = clock()
    reached = [0.0]

    def say(fraction: float, message: str) -> None:  # never backwards: stages end before their share of the budget
        reached[0] = max(reached[0], fraction)
        if progress is not None:
            progress(reached[0], message)

    original = (parts.talker.net, parts.talker.governor, parts.code_predictor.net, parts.code_predictor.governor)
    spinning = spin_setting().source == "default"
    # where each stage's share of the budget ends (fractions of it); the spin stage takes its share from the others
    stage_end = ({"threads": 0.35, "spin": 0.65, "precision": 0.72} if spinning
                 else {"threads": 0.45, "spin": 0.45, "precision": 0.6})
    hard = t0 + (budget if time_cap is None else time_cap)
    frames = FrameSource(parts.talker, parts.code_predictor)
    figures: list[CandidateFigure] = []
    try:
        counts = thread_candidates(cores)
        say(0.0, "Loading the networks for each thread count…")
        talker_nets = {n: _net_at(parts, "talker", n) for n in counts}
        cp_nets = {n: _net_at(parts, "code predictor", n) for n in counts}

        def frame_at(n: int) -> dict[str, float]:
            parts.talker.net, parts.code_predictor.net = talker_nets[n], cp_nets[n]
            parts.talker.governor = parts.code_predictor.governor = ThreadGovernor(n, adaptive=False)
            return {k: parts.timing(k, n, v) for k, v in frames.next().items()}

        say(0.05, "Timing the talker and code predictor…")
        for n in counts:  # warm-up: the first call of a freshly loaded net allocates its buffers
            frame_at(n)
        # the minimum rounds are what a busy machine still gets: at load 10-12 on 2 cores (fp32, full size) three
        # rounds here and two in each decoder stage took the run to 17-24 s; quiet, the deadlines allow more
        samples = alternate(counts, frame_at, min_rounds=2, max_rounds=8,
                            deadline=t0 + stage_end["threads"] * budget, cancel=cancel, clock=clock,
                            on_sample=lambda c, f: say(min(stage_end["threads"], (clock() - t0) / budget),
                                                       "Timing the talker and code predictor "
                                                       f"({c} thread{'s' if c > 1 else ''})…"),
                            hard_deadline=hard)
        spin = spin_setting()
        spin_count = spin.count if spin.source == "tuned" else None  # kept as it was measured on this CPU
        if spin.source == "default" and spin.count is not None and counts[-1] > 1:
            cp_top = cp_nets[counts[-1]]

            def cp_at_top() -> CodePredictor:
                parts.code_predictor.net = cp_top
                return parts.code_predictor

            probes = spin_stage(parts.bundle, cp_at_top, samples[counts[-1]].get("code predictor", []), spin.count,
                                counts[-1], t0 + stage_end["spin"] * budget, clock, cancel, parts.spin_probe)
            if len(probes) > 1:  # a choice between counts (a busy machine may have time for this one alone)
                spin_count = choose_spin(probes)
                figures += spin_figures(probes, spin_count)
                chosen = probes[spin_count]
                if spin_count != spin.count and counts[-1] > 1 and chosen.quiet:
                    # the code predictor's count at the spin count the next start runs at (one thread opens no
                    # team: its frames do not depend on the spin count)
                    samples = {c: dict(f) for c, f in samples.items()}
                    samples[counts[-1]]["code predictor"] = list(chosen.quiet)
        talker_threads, cp_threads = pick(samples, "talker"), pick(samples, "code predictor")
        figures += _figures(samples, "talker threads", "talker", "talker step", talker_threads)
        figures += _figures(samples, "code predictor threads", "code predictor", "code predictor (15 steps)",
                            cp_threads)
        parts.talker.net, parts.code_predictor.net = talker_nets[talker_threads], cp_nets[cp_threads]
        parts.talker.governor = ThreadGovernor(talker_threads, adaptive=False)
        parts.code_predictor.governor = ThreadGovernor(cp_threads, adaptive=False)
        parts.spare[("talker", talker_threads)] = talker_nets[talker_threads]
        parts.spare[("code predictor", cp_threads)] = cp_nets[cp_threads]
        talker_nets.clear()  # the losers are freed
        cp_nets.clear()

        say(0.45, "Timing the GPUs…")
        gpu_ms, gpu_figures = time_gpus(parts.bundle, FrameSource, parts.timing, parts.include_software_gpus,
                                        cancel)
        if cancel is not None and cancel():
            raise Cancelled("Tuning was cancelled.")

        bf16_faster = None
        precision = parts.decoder.precision
        cpu_ms = (median(samples[talker_threads]["talker"]) + median(samples[cp_threads]["code predictor"])) * 1000
        frame_s = cpu_ms / 1000 if math.isfinite(cpu_ms) else 0.0
        # a stage starts only where its least work fits before the hard stop (a busy machine's fp32 frame of 0.9 s
        # made the codes for the decoder stage alone take 3.6 s past it): the codes to decode and two decodes of
        # them, each about a frame's time; two streamed arrangements of STREAM_FRAMES frames each
        if bf16_decoder_available(parts.bundle) and clock() + 3 * DECODE_FRAMES * frame_s < hard:
            say(stage_end["spin"], "Timing the speech decoder at fp32 and bf16…")
            codes = frames.codes(DECODE_FRAMES)
            decoders = {p: _decoder_at(parts, p, parts.decoder.threads) for p in ("fp32", "bf16")}
            dec_samples = alternate(list(decoders), lambda p: {"decode": parts.timing("decode", p, _timed(decoders[p], codes))},
                                    min_rounds=1, max_rounds=4, deadline=t0 + stage_end["precision"] * budget,
                                    cancel=cancel, clock=clock, hard_deadline=hard)
            best = pick(dec_samples, "decode")
            measured = sum(1 for f in dec_samples.values() if f.get("decode"))
            bf16_faster = best == "bf16" if measured > 1 else None  # one precision timed is no comparison
            figures += _figures(dec_samples, "decoder precision", "decode", "decode, whole", best)
            if decoder_request == "auto" and bf16_faster is not None:
                precision = best
            parts.spare[("decoder", decoders[precision].threads)] = decoders[precision]
            decoders.clear()

        say(stage_end["precision"], "Timing the speech decoder beside generation…")
        # generation's threads are timed with the decoder's: a decoder thread beside two generation threads
        # competes for two cores (full-size 0.6B q8, AMD EPYC, 2 cores, per streamed frame: generation on 2 with
        # the decoder beside on 1, 114-120 ms; generation on 1 beside it, 90-98; on 2 decoding after each frame,
        # 93-99; all on a machine with one other busy process)
        top = counts[-1]
        configs = [(g, True, d) for g in counts for d in counts] + [(top, False, top)]
        default = (top, True, top)  # decoding beside generation on every core, as without a tuning
        if clock() + 2 * STREAM_FRAMES * 1.5 * frame_s >= hard:  # no time for a comparison
            configs = [default]
        stream_decoders = {n: _decoder_at(parts, precision, n) for n in {top, *(c[2] for c in configs)}}

        def streamed(config: tuple[int, bool, int]) -> dict[str, float]:
            gen, overlap, n = config
            parts.talker.governor = ThreadGovernor(min(gen, talker_threads), adaptive=False)
            parts.code_predictor.governor = ThreadGovernor(min(gen, cp_threads), adaptive=False)
            stream = parts.stream(stream_decoders[n], overlap)
            t = time.perf_counter()
            try:
                for _ in range(STREAM_FRAMES):
                    stream.push(frames.next(timed=False))
                stream.finish()
            finally:
                stream.close()
            return {"stream": parts.timing("stream", config, (time.perf_counter() - t) / STREAM_FRAMES)}

        if len(configs) > 1:
            stream_samples = alternate(configs, streamed, min_rounds=1, max_rounds=4, deadline=hard, cancel=cancel,
                                       clock=clock, hard_deadline=hard,
                                       on_sample=lambda c, f: say(min(0.99, (clock() - t0) / budget),
                                                                  "Timing the speech decoder beside generation…"))
            timed = sum(1 for f in stream_samples.values() if f.get("stream"))
            streaming_threads, overlap, decoder_threads = pick(stream_samples, "stream") if timed > 1 else default
            figures += [replace(f, value=_config_name(c)) for c, f in
                        zip(configs, _figures(stream_samples, "decoding", "stream", "streamed frame",
                                              (streaming_threads, overlap, decoder_threads), keep_all=True),
                            strict=True) if f.samples]
        else:
            streaming_threads, overlap, decoder_threads = configs[0]
        parts.spare[("decoder", decoder_threads)] = stream_decoders[decoder_threads]
        device_ms = {"cpu": round(cpu_ms, 2), **gpu_ms}
        gpu = faster_gpu(device_ms)
        if gpu_ms:
            figures.append(CandidateFigure("device", "cpu", "generation, frame", device_ms["cpu"], 0, gpu is None))
        figures += [replace(f, chosen=f.value.split(" ")[0] == gpu) for f in gpu_figures]
        settings = TunedSettings(talker_threads=talker_threads, code_predictor_threads=cp_threads,
                                 decoder_threads=decoder_threads, overlap_decode=overlap,
                                 decoder_bf16_faster=bf16_faster, gpu_faster=(gpu is not None) if gpu_ms else None,
                                 streaming_threads=streaming_threads, spin_count=spin_count)
        say(1.0, "Tuned.")
        return TuningRecord(tuning_key(parts.bundle), settings, tuple(figures), clock() - t0, utc_now(),
                            load_average(), device_ms)
    finally:
        (parts.talker.net, parts.talker.governor, parts.code_predictor.net,
         parts.code_predictor.governor) = original


def apply_settings(parts: Parts, settings: TunedSettings, decoder_precision: str) -> None:
    """Put tuned settings in place (the caller decides whether they apply: an explicit thread count wins).
    decoder_precision: what the decoder should run at ("fp32", "bf16", ...); nets already loaded for the
    tuning are used, others are loaded."""
    parts.talker.net = parts.spare.pop(("talker", settings.talker_threads), None) \
        or _net_at(parts, "talker", settings.talker_threads)
    parts.code_predictor.net = parts.spare.pop(("code predictor", settings.code_predictor_threads), None) \
        or _net_at(parts, "code predictor", settings.code_predictor_threads)
    parts.talker.governor = ThreadGovernor(parts.cores, adaptive=parts.adaptive_threads, start=settings.talker_threads,
                                           load=shared_cpu_load())
    parts.code_predictor.governor = ThreadGovernor(parts.cores, adaptive=parts.adaptive_threads,
                                                   start=settings.code_predictor_threads, load=shared_cpu_load())
    decoder = parts.spare.pop(("decoder", settings.decoder_threads), None)
    if decoder is None or decoder.precision != decoder_precision:
        decoder = _decoder_at(parts, decoder_precision, settings.decoder_threads)
    parts.decoder = decoder
    parts.overlap_decode = settings.overlap_decode
    parts.streaming_threads = settings.streaming_threads
    parts.spare.clear()


@dataclass(frozen=True)
class ThreadPlan:
    """Thread counts and decoding a Synthesizer opens with."""

    threads: int  # the most threads a network uses (the thread governor's upper count)
    start: tuple[int | None, int | None]  # the governor's first count (talker, code predictor); None: `threads`
    int8: tuple[int | None, int | None]  # load-time count of the int8 Gemms (talker, code predictor); None: default
    decoder: int
    overlap_decode: bool
    streaming_threads: int | None = None  # generation's upper count while audio streams (None: no limit)


def thread_plan(record: TuningRecord | None, explicit_threads: int | None, cores: int) -> ThreadPlan:
    """An explicit thread count applies to every network; else the tuned counts (the thread governors starting at
    them and free to move between them and the other end); else all cores. int8 Gemms load at the governor's upper
    count where teams can be limited per thread (engine/runtime/openmp.py: the governor then moves them too),
    else at the tuned count or their default. Decoding beside generation follows the tuning whatever the count."""
    overlap = record.settings.overlap_decode if record is not None else True
    if explicit_threads:
        n = int(explicit_threads)
        return ThreadPlan(n, (None, None), (n, n), n, overlap)
    every = (cores, cores) if limited() else None
    if record is not None:
        s = record.settings
        tuned = (min(cores, s.talker_threads), min(cores, s.code_predictor_threads))
        return ThreadPlan(cores, tuned, every or tuned, min(cores, s.decoder_threads), overlap,
                          s.streaming_threads and min(cores, s.streaming_threads))
    return ThreadPlan(cores, (None, None), every or (None, None), cores, True)


def decoder_choice(bundle: Bundle, request: str, record: TuningRecord | None) -> str:
    """The decoder precision to load for a request: "auto" follows the tuning's measurement where there is one
    (bf16 only where it was faster), else the request as it is."""
    faster = record.settings.decoder_bf16_faster if record is not None else None
    if request != "auto" or faster is None or not bf16_decoder_available(bundle):
        return request
    if faster:
        return "bf16"
    return "fp32" if decoder_net_precision(bundle, "auto") == "bf16" else "auto"


def tune_parts(parts: Parts, decoder_request: str, explicit_threads: int | None, progress: Progress | None = None,
               cancel: Callable[[], bool] | None = None, budget: float = DEFAULT_BUDGET,
               timing: Callable[[str, Any, float], float] | None = None, include_software_gpus: bool = False,
               spin_probe: Probe | None = None, time_cap: float | None = None,
               clock: Callable[[], float] = time.monotonic) -> tuple[TuningRecord, str | None]:
    """Measure the loaded networks `parts` on this machine (candidates up to its physical cores, whatever they were
    opened with), store the record, then apply it to `parts` (explicit_threads, when the user set a count, keeps
    it). Returns the record and the note of storing it. Cancelled changes nothing and stores nothing. timing and
    spin_probe inject a CPU (tests); a CPU injected through timing alone has no spin count figures (the spin stage
    measures nothing)."""
    if timing is not None:
        parts.timing = timing
        parts.spin_probe = spin_probe or (lambda spin, seconds: None)
    elif spin_probe is not None:
        parts.spin_probe = spin_probe
    parts.include_software_gpus = include_software_gpus
    record = run_tuning(parts, physical_cores(), budget, decoder_request, progress, cancel, clock, time_cap)
    note = save_record(record)
    precision = decoder_net_precision(parts.bundle, decoder_choice(parts.bundle, decoder_request, record))
    if explicit_threads is not None:
        apply_settings(parts, replace(record.settings, talker_threads=explicit_threads,
                                      code_predictor_threads=explicit_threads, decoder_threads=explicit_threads),
                       precision)
    else:
        apply_settings(parts, record.settings, precision)
    return record, note


def tune_synthesizer(synth, progress: Progress | None = None, cancel: Callable[[], bool] | None = None,
                     budget: float = DEFAULT_BUDGET, **measuring: Any) -> TuningRecord:
    """Synthesizer.tune with a CPU injected through `measuring` (tune_parts' timing, spin_probe, time_cap...)."""
    return synth.tune(progress, cancel, budget, **measuring)


# -------------------------------------------------------------------------------------------------- helpers


def _net_at(parts: Parts, part: str, threads: int):
    """The part's net for `threads`: its own net when it can run at that count (float graphs; int8 graphs loaded
    for at least that many threads where teams can be limited), else a new load (int8 Gemms fix their count at
    load)."""
    owner = parts.talker if part == "talker" else parts.code_predictor
    if (part, threads) in parts.spare:
        return parts.spare[(part, threads)]
    if owner.net.can_run_at(threads):
        return owner.net
    return owner.load_net(threads, threads)


def _decoder_at(parts: Parts, precision: str, threads: int) -> CodecDecoder:
    dec = parts.decoder
    if dec.precision == precision and dec.threads == threads:
        return dec
    # "fp16" is what "auto" loads for fp16 bundles; it is not a precision a caller asks for
    return CodecDecoder(parts.bundle, threads, precision if precision in DECODER_PRECISIONS else "auto")


def _timed(decoder: CodecDecoder, codes: np.ndarray) -> float:
    t = time.perf_counter()
    decoder.decode(codes)
    return (time.perf_counter() - t) / len(codes)


def _figures(samples, setting: str, part: str, label: str, chosen, keep_all: bool = False) -> list[CandidateFigure]:
    """One figure per candidate measured (keep_all: per candidate, the unmeasured with 0 samples)."""
    return [CandidateFigure(setting, str(c), label, median(parts.get(part, ())) * 1000, len(parts.get(part, ())),
                            c == chosen) for c, parts in samples.items() if keep_all or parts.get(part)]


def _config_name(config: tuple[int, bool, int]) -> str:
    gen, overlap, n = config
    return (f"{'beside generation' if overlap else 'after each frame'}, {n} thread{'s' if n > 1 else ''}; "
            f"generation {gen}")
