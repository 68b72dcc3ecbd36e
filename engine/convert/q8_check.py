"""The 8-bit check: a q8 bundle measured against the float model on the weights it was made from, with the Linears
that move the output most kept in fp32 until both networks are within BOUND, else a float bundle.

Runs inside every q8 conversion (convert_checkpoint: `qwen3tts convert`, a download, the app's import) and on a
bundle made before it (check_installed_bundle). Steps, all on the checkpoint at hand:
1. the talker part converted fp32 (the reference) and q8, both run by the engine on PROMPTS (one sentence in each
   of six languages, laid out as smooth.py's calibration prompt: role and codec control rows, the text, then
   frames fed back). The fp32 run is greedy; the q8 run is fed fp32's codes (teacher forcing, so an early
   difference cannot cascade) and its logits are compared position by position: the talker's code-0 logits and
   the code predictor's 15 per frame;
2. per network: sampling_kl (KL(fp32 || q8) of the sampling distribution at T 0.9 over fp32's top 50, the
   sampler's defaults) and top-1 agreement;
3. a network over BOUND first gets the outlier input channels of its Linears split off into fp32 (q8_split.py:
   channels far above the rest in the smoothing's calibration pass; the decomposition costs a few K + N x c values
   and a few small layers per Linear call, no Linear is kept float for it), in the layers where the split removes
   most KL per split Linear call a frame (each layer made 8-bit alone, unsplit and split, q8_layers.py; a
   code-predictor Linear runs 15 times a frame, a talker one once) until the estimate is SPLIT_AIM x BOUND, and is
   measured again; still over, every Linear with outlier channels in it is split and it is measured again;
   still over, it gets its Linears measured one at a time (q8_layers.py: the KL its 8-bit product alone
   causes; layer by layer first, then Linear by Linear in the layers holding most of it, on the first prompt);
   the fewest Linears (or whole layers), largest first, whose share of the summed per-Linear KLs brings the network's
   measured KL to the bound are promoted to fp32 (the errors of separate layers add up roughly; the estimate is
   checked by measuring again);
4. measured again; up to MAX_ROUNDS rounds, each aiming at half the last target; a bundle still over BOUND, or
   one whose float Linears would make it read as many weight bytes per frame as the fp32 bundle (whose weights are
   fp16-stored: 2 bytes against 1; the frame's time follows its weight bytes, docs/performance.md "CPU speed:
   self-tuning and the memory floor"),
   becomes a float bundle instead, with one line saying why. Promotion is ordered by KL per byte a frame reads
   more: a code-predictor layer costs 15 reads a frame, a talker layer one.

BOUND, 2e-3 per network: plain random checkpoints give 7.6e-4 (talker) and 1.2e-3 (code predictor) at full size
(docs/performance.md "8-bit accuracy"), outlier checkpoints whose outliers smoothing can move 8.0e-4 / 1.3e-3; the
bound sits above those (so they keep all their Linears 8-bit and today's speed) and well under what was seen to
change greedy decoding: at channels10 (4.0e-3 / 6.5e-3) top-1 agreement fell to 0.77 / 0.80, i.e. the sampler's
favourite code differed at a quarter of the positions.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConvertError
from ..io.json_file import read_json_object
from ..runtime.bundle import MANIFEST, Bundle
from ..runtime.bundle_writer import PARTIAL_MARK
from ..runtime.manifest_parts import TalkerPart
from ..runtime.q8_check_record import NetworkAccuracy, PromotedLayer, Q8CheckRecord
from . import q8_split, smooth
from .checkpoint import Checkpoint
from .q8_layers import code_predictor_sensitivity, expand, linear_sizes, talker_sensitivity
from .stack_forward import TextRows

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

BOUND = 2e-3
TEMPERATURE, TOP_K = 0.9, 50  # the sampler's defaults (engine/types.py GenerationSettings)
PROMPTS = {
    "en": "The old lighthouse keeper counted the ships every evening and wrote their names in a small book.",
    "zh": "今天下午我们在公园里散步，湖边的花开得很漂亮，孩子们在草地上放风筝。",
    "ja": "明日の朝、駅の前で古い友達と会って、一緒に山の上の小さな店へ行きます。",
    "de": "Der Zug nach Hamburg fährt heute eine halbe Stunde später ab, weil es stark geschneit hat.",
    "fr": "Nous avons passé une soirée merveilleuse au bord de la mer en écoutant les vagues.",
    "es": "Mañana por la mañana visitaremos el museo de la ciudad y después comeremos en la plaza.",
}
FRAMES = 16  # teacher-forced frames per prompt
MAX_TEXT_TOKENS = 40
MAX_ROUNDS = 3  # promotion rounds after the first measurement
SPLIT_AIM = 0.6  # of the bound: what the fewest splits aim at (a miss costs a round splitting every candidate)
SENSITIVITY_FRAMES = 16  # code-predictor frames the per-layer measurement runs on (the talker: the first prompt)
NETS = ("talker", "code_predictor")
Report = Callable[[float, str], None]


def sampling_kl(ref: np.ndarray, got: np.ndarray) -> float:
    """Mean over positions of KL(p_ref || p_got), p = softmax(logits / T) over ref's top-k tokens."""
    ref = ref.reshape(-1, ref.shape[-1]).astype(np.float64)
    got = got.reshape(-1, got.shape[-1]).astype(np.float64)
    k = min(TOP_K, ref.shape[-1])
    idx = np.argpartition(-ref, k - 1, axis=-1)[:, :k]
    a = np.take_along_axis(ref, idx, -1) / TEMPERATURE
    b = np.take_along_axis(got, idx, -1) / TEMPERATURE
    la = a - a.max(-1, keepdims=True)
    la -= np.log(np.exp(la).sum(-1, keepdims=True))
    lb = b - b.max(-1, keepdims=True)
    lb -= np.log(np.exp(lb).sum(-1, keepdims=True))
    return float(np.mean(np.sum(np.exp(la) * (la - lb), axis=-1)))


def top1_agreement(ref: np.ndarray, got: np.ndarray) -> float:
    return float(np.mean(ref.argmax(-1) == got.argmax(-1)))


# ------------------------------------------------------------------------------------------- prompts and runs


def calibration_prompts(ckpt: Checkpoint) -> tuple[list[str], list[np.ndarray], np.ndarray]:
    """(languages, the talker's prompt rows per language (L, H), the text pad row added to every fed-back frame)."""
    from ..text.tokenizer import TextTokenizer

    cfg, top = ckpt.talker_config, ckpt.config
    text = TextRows(ckpt)
    codec = ckpt.main.get("talker.model.codec_embedding.weight")
    try:
        tokenizer = TextTokenizer(ckpt.path)
    except Exception as e:  # noqa: BLE001 - the text part reports a bad tokenizer in its own words
        raise ConvertError(f"the 8-bit check cannot read the checkpoint's tokenizer: {e}") from None
    pad_t, pad_c = text(int(top["tts_pad_token_id"])), codec[int(cfg["codec_pad_id"])]
    control = [cfg.get(k) for k in ("codec_nothink_id", "codec_think_bos_id", "codec_think_eos_id")]
    prompts = []
    for sentence in PROMPTS.values():
        ids = [i % text.vocab for i in tokenizer.encode(sentence)[:MAX_TEXT_TOKENS]]
        rows = [text(int(top["im_start_token_id"])), text(int(top["assistant_token_id"])), text(ids[0])]
        rows += [pad_t + codec[int(c)] for c in control if c is not None]
        rows.append(text(int(top["tts_bos_token_id"])) + pad_c)
        rows += [text(t) + pad_c for t in ids[1:]]
        rows.append(text(int(top["tts_eos_token_id"])) + pad_c)
        rows.append(pad_t + codec[int(cfg["codec_bos_id"])])
        prompts.append(np.stack(rows).astype(np.float32))
    return list(PROMPTS), prompts, pad_t.astype(np.float32)


@dataclass
class PromptRun:
    codes: np.ndarray  # (frames, groups)
    talker_logits: np.ndarray  # (frames, codebook)
    cp_logits: np.ndarray  # (frames, groups - 1, codebook)
    talker_rows: np.ndarray  # the talker's input rows: the prompt, then each fed-back frame but the last
    hidden: np.ndarray  # (frames, H): the talker output each frame's code predictor starts from


def run_prompts(bundle_dir: Path, prompts: list[np.ndarray], pad: np.ndarray, frames: int,
                forced: list[PromptRun] | None, threads: int, cancel: Callable[[], None]) -> list[PromptRun]:
    """Greedy (forced None) or fed the codes of `forced`, one prompt after another."""
    from ..nets.code_predictor import CodePredictor
    from ..nets.talker import Talker

    bundle = Bundle.open(bundle_dir)
    talker, cp = Talker(bundle, threads), CodePredictor(bundle, threads)
    cb = cp.codebook_size
    runs = []
    for p, rows in enumerate(prompts):
        seq, hidden, logits = talker.start(rows)
        codes = np.zeros((frames, cp.groups), np.int64)
        t_logits, c_logits, fed, hiddens = [], [], [rows], []
        for f in range(frames):
            cancel()
            t_logits.append(np.array(logits[:cb], np.float32))
            hiddens.append(np.array(hidden, np.float32).reshape(-1))
            c0 = int(forced[p].codes[f, 0]) if forced else int(np.argmax(logits[:cb]))
            frame_logits: list[np.ndarray] = []

            def choose(lg: np.ndarray, g: int, f=f, p=p, out=frame_logits) -> int:
                out.append(np.array(lg, np.float32))
                return int(forced[p].codes[f, g]) if forced else int(np.argmax(lg))

            codes[f, 0], codes[f, 1:] = c0, cp.predict(hidden, c0, choose)
            c_logits.append(np.stack(frame_logits))
            if f < frames - 1:
                row = cp.feedback(codes[f]) + pad
                fed.append(row[None])
                hidden, logits = talker.step(seq, row)
        runs.append(PromptRun(codes, np.stack(t_logits), np.stack(c_logits), np.concatenate(fed),
                              np.stack(hiddens)))
    return runs


def compare(ref: list[PromptRun], got: list[PromptRun]) -> dict[str, tuple[float, float]]:
    """Per network: (sampling KL, top-1 agreement) over every prompt's positions."""
    out = {}
    for net, key in (("talker", "talker_logits"), ("code_predictor", "cp_logits")):
        a = np.concatenate([getattr(r, key).reshape(-1, r.talker_logits.shape[-1]) for r in ref])
        b = np.concatenate([getattr(r, key).reshape(-1, r.talker_logits.shape[-1]) for r in got])
        out[net] = (sampling_kl(a, b), top1_agreement(a, b))
    return out


def cp_sequences(bundle_dir: Path, runs: list[PromptRun], limit: int) -> np.ndarray:
    """Each frame's code-predictor input rows (frames, groups, H): the talker hidden, code 0's row, codes 1..14's
    rows; at most `limit` frames, spread over the prompts."""
    bundle = Bundle.open(bundle_dir)
    part = bundle.record(TalkerPart)
    codec = bundle.table(part.codec_table)
    tables = bundle.table(part.cp_codec_table)
    seqs = []
    for r in runs:
        for f in range(r.codes.shape[0]):
            c = r.codes[f]
            seqs.append(np.stack([r.hidden[f], codec[c[0]], *(tables[g][c[g + 1]] for g in range(len(c) - 2))]))
    pick = np.linspace(0, len(seqs) - 1, min(limit, len(seqs))).round().astype(int)
    return np.stack([seqs[i] for i in pick]).astype(np.float32)


# ------------------------------------------------------------------------------------------- choosing layers


def choose_promotions(kl_alone: dict[str, float], measured: float, target: float,
                      already: frozenset[str], cost: dict[str, int] | None = None) -> list[str]:
    """Linears to promote, most KL per byte of `cost` first (largest KL first without costs), until the estimated
    KL is `target` or under. The KL measured now is put down to the Linears still 8-bit (not in `already`) in
    proportion to their KL alone, so the estimate is measured x (their sum left after promotion / their sum
    now)."""
    now = sum(v for k, v in kl_alone.items() if k not in already)
    if now <= 0:
        return []
    left = now
    chosen = []
    per_byte = {k: v / max(1, cost[k]) if cost else v for k, v in kl_alone.items()}
    for name, value in sorted(kl_alone.items(), key=lambda kv: -per_byte[kv[0]]):
        if measured * left / now <= target:
            break
        if name in already:
            continue
        chosen.append(name)
        left -= value
    return chosen


def reads_per_frame(name: str, groups: int, q8: bool = True) -> int:
    """How often one frame reads a Linear's weights: the talker's once; the code predictor's layers (and its
    projection) once per call, 15 on q8 bundles (positions 0 and 1 share a call), 16 on float ones; its heads once
    each."""
    if name.startswith("code_predictor.") and ".head." not in name:
        return groups - 1 if q8 else groups
    return 1


def extra_bytes_per_frame(name: str, elements: int, groups: int, fp32: bool = False) -> int:
    """Weight bytes a frame reads more with the Linear kept float: fp16-stored 2 bytes (fp32: 4) instead of 1."""
    return (3 if fp32 else 1) * elements * reads_per_frame(name, groups)


def frame_bytes(sizes: dict[str, int], groups: int) -> tuple[int, int]:
    """(int8 bundle, float bundle with fp16-stored weights) weight bytes per frame, over every Linear."""
    linears = {k: v for k, v in sizes.items() if not k.partition(".")[2].isdigit()}  # not the whole-layer sums
    return (sum(v * reads_per_frame(k, groups) for k, v in linears.items()),
            sum(2 * v * reads_per_frame(k, groups, q8=False) for k, v in linears.items()))


# ------------------------------------------------------------------------------------------- the check


@dataclass(frozen=True)
class CheckOutcome:
    record: Q8CheckRecord
    talker_bundle: Path  # the measured talker part to put in the bundle (q8, or fp32 when it fell back)
    promote: frozenset[str]


@contextmanager
def check_folder(dest: Path) -> Iterator[Path]:
    """A hidden folder beside `dest` for the check's bundles, removed afterwards; named and locked like a
    BundleWriter's temporary folder, so one left by a killed process is swept (bundle_writer.sweep_partials)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}{PARTIAL_MARK}check-", dir=dest.parent))
    lock = None
    if fcntl is not None:
        lock = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if lock is not None:
            os.close(lock)


def check_q8(src: Path, work: Path, report: Report, cancel: Callable[[], None], smoothing: bool = True,
             threads: int = 2, bound: float | None = None, existing: Path | None = None) -> CheckOutcome:
    """The check (module docstring) on checkpoint `src`, its bundles in `work`. existing: an 8-bit bundle made
    before the check, measured first as it is (its talker part is used when within the bound). bound: BOUND."""
    from . import convert_checkpoint

    bound = BOUND if bound is None else bound

    t0 = time.perf_counter()
    ckpt = Checkpoint.open(src)
    try:
        languages, prompts, pad = calibration_prompts(ckpt)
        sizes = linear_sizes(ckpt)
        groups = int(ckpt.talker_config.get("num_code_groups", 16))
        int8_bytes, float_bytes = frame_bytes(sizes, groups)
    finally:
        ckpt.close()
    report(0.0, "converting the float reference")
    ref_dir = convert_checkpoint(src, work / "float", "fp32", parts=["talker"], check=False)
    report(0.15, "running the float reference")
    ref = run_prompts(ref_dir, prompts, pad, FRAMES, None, threads, cancel)

    promote: frozenset[str] = frozenset()
    split: dict[str, tuple[int, ...]] = {}
    candidates: dict[str, tuple[int, ...]] | None = None
    kl_alone: dict[str, float] = {}
    first: dict[str, tuple[float, float]] = {}
    reason = ""
    trial = existing
    rnd = fixes = 0  # bundles measured before this one; promotion rounds done
    while True:
        if trial is None or rnd > 0:
            report(min(0.85, 0.25 + 0.6 * rnd / (MAX_ROUNDS + 2)),
                   f"converting 8-bit ({len(split)} split, {len(promote)} kept float)")
            trial = convert_checkpoint(src, work / f"q8-{rnd}", "q8", parts=["talker"], smooth=smoothing,
                                       check=False, promote=expand(promote), split=split)
            if rnd > 0:
                shutil.rmtree(work / f"q8-{rnd - 1}", ignore_errors=True)
            stored_fp32 = set(Bundle.open(trial).record(TalkerPart).promoted_fp32_layers)
            extra = sum(extra_bytes_per_frame(n, sizes[n], groups, bool(expand([n]) & stored_fp32))
                        for n in promote)
            if int8_bytes + extra >= float_bytes:  # weights fp16 could not hold are fp32: 4 bytes, not 2
                reason = _no_gain(int8_bytes + extra, float_bytes)
                break
        report(min(0.9, 0.3 + 0.6 * rnd / (MAX_ROUNDS + 2)), "measuring 8-bit against the float reference")
        got = run_prompts(trial, prompts, pad, FRAMES, ref, threads, cancel)
        figures = compare(ref, got)
        first = first or figures
        report(min(0.9, 0.3 + 0.6 * rnd / (MAX_ROUNDS + 2)),
               f"measured KL {figures['talker'][0]:.2e} / {figures['code_predictor'][0]:.2e} (talker / code "
               f"predictor) with {len(split)} split, {len(promote)} kept float")
        over = [net for net in NETS if figures[net][0] > bound]
        if not over:
            break
        if candidates is None:  # the cheapest fix first: outlier channels split off, nothing kept float yet
            report(0.3, "looking for outlier channels")
            candidates = _outlier_candidates(src, groups)
            mine = {k: v for k, v in candidates.items() if k.partition(".")[0] in over}
            if mine:
                report(0.3, "measuring what splitting each layer's outlier channels removes")
                split = _fewest_splits(src, ref_dir, ref, prompts, smoothing, cancel, mine,
                                       {net: figures[net][0] for net in over}, bound, groups)
                rnd += 1
                continue
        missing = {k: v for k, v in (candidates or {}).items() if k.partition(".")[0] in over and k not in split}
        if missing and not kl_alone:  # the fewest splits fell short: every outlier channel of those networks
            split = split | missing
            rnd += 1
            continue
        if fixes == MAX_ROUNDS:
            reason = (f"{' and '.join(n.replace('_', ' ') for n in over)} still over the bound {bound:.0e} after "
                      f"{len(promote)} were kept float")
            break
        if not kl_alone:
            report(0.35, "measuring each layer's 8-bit error")
            kl_alone = _layer_figures(src, ref_dir, ref, prompts, smoothing, cancel, split)
        target = bound / 2 ** fixes
        more: list[str] = []
        cost = {k: extra_bytes_per_frame(k, sizes[k], groups) for k in kl_alone}
        for net in over:
            mine_kl = {k: v for k, v in kl_alone.items() if k.startswith(net + ".")}
            more += choose_promotions(mine_kl, figures[net][0], target, promote, cost)
        if not more:
            reason = "no layer left whose 8-bit error explains the difference"
            break
        promote = promote | frozenset(more)
        extra = sum(cost[n] for n in promote)
        if int8_bytes + extra >= float_bytes:
            reason = _no_gain(int8_bytes + extra, float_bytes)
            break
        floated = expand(promote)
        whole = [net for net in NETS if all(k in floated for k in sizes
                                            if k.startswith(net + ".") and not k.partition(".")[2].isdigit())]
        if whole:
            reason = f"every Linear of the {whole[0].replace('_', ' ')} would be float"
            break
        fixes += 1
        rnd += 1
    fp32 = set(Bundle.open(trial).record(TalkerPart).promoted_fp32_layers) if trial else set()
    promoted = tuple(PromotedLayer(n, kl_alone.get(n, 0.0),
                                   extra_bytes_per_frame(n, sizes[n], groups, bool(expand([n]) & fp32)))
                     for n in sorted(promote, key=lambda n: -kl_alone.get(n, 0.0)))

    def accuracy(net: str) -> NetworkAccuracy:
        return NetworkAccuracy(figures[net][0], figures[net][1], first[net][0], first[net][1])

    fell_back = bool(reason)
    record = Q8CheckRecord(
        bound=bound, talker=accuracy("talker"), code_predictor=accuracy("code_predictor"),
        promoted=() if fell_back else promoted,
        split=() if fell_back else tuple(sorted(n for n in split if n not in expand(promote))),
        promoted_share=0.0 if fell_back else sum(sizes[n] for n in promote) / sum(sizes.values()),
        outcome="float" if fell_back else "q8", reason=reason, rounds=rnd + 1,
        seconds=round(time.perf_counter() - t0, 1), languages=tuple(languages), frames=FRAMES)
    assert trial is not None
    return CheckOutcome(record, ref_dir if fell_back else trial, frozenset() if fell_back else expand(promote))


def _no_gain(q8_bytes: int, float_bytes: int) -> str:
    return (f"with the layers it would keep float it reads {q8_bytes / 1e9:.2f} GB of weights a frame, no less "
            f"than the float bundle's {float_bytes / 1e9:.2f} GB")


def _layer_figures(src: Path, ref_dir: Path, ref: list[PromptRun], prompts: list[np.ndarray], smoothing: bool,
                   cancel: Callable[[], None], split: dict[str, tuple[int, ...]], refine: bool = True
                   ) -> dict[str, float]:
    """KL per Linear alone (q8_layers.py; per layer where not refine), on the weights the converter quantizes
    (smoothed when it smooths), with the outlier channels split off where the bundle splits them."""
    ckpt = Checkpoint.open(src)
    try:
        weights = smooth.smoothed(ckpt, smooth.ALPHA)[0] if smoothing else ckpt
        cb = ref[0].talker_logits.shape[-1]
        out = talker_sensitivity(weights, ref[0].talker_rows, len(prompts[0]) - 1, cb, sampling_kl, cancel, split,
                                 refine)
        out.update(code_predictor_sensitivity(weights, cp_sequences(ref_dir, ref, SENSITIVITY_FRAMES),
                                              sampling_kl, cancel, split, refine))
        return out
    finally:
        ckpt.close()


def choose_splits(before: dict[str, float], after: dict[str, float], measured: float, target: float,
                  cost: dict[str, int]) -> list[str]:
    """Layers (or heads) whose outlier channels to split, most KL removed per split Linear call a frame first,
    until the estimated KL is `target` or under. before / after: KL with the layer alone 8-bit, unsplit / split;
    the KL measured now is put down to the layers in proportion to `before` (as choose_promotions does), so the
    estimate is measured x (their sum less the KL the chosen splits remove / their sum)."""
    now = sum(before.values())
    if now <= 0:
        return list(cost)
    gain = {k: max(0.0, before[k] - after.get(k, before[k])) for k in cost}
    left, chosen = now, []
    for name in sorted(cost, key=lambda k: -gain[k] / max(1, cost[k])):
        if measured * left / now <= target or gain[name] <= 0:
            break
        chosen.append(name)
        left -= gain[name]
    return chosen


def _fewest_splits(src: Path, ref_dir: Path, ref: list[PromptRun], prompts: list[np.ndarray], smoothing: bool,
                   cancel: Callable[[], None], candidates: dict[str, tuple[int, ...]], measured: dict[str, float],
                   bound: float, groups: int) -> dict[str, tuple[int, ...]]:
    """The candidates (Linear -> outlier channels) of the layers whose split the bound needs (choose_splits, aiming
    at SPLIT_AIM x bound per network): each split Linear costs a few small layers per call (a talker Linear one
    call a frame, a code-predictor one 15), so splitting only where it removes the error keeps the frame fast."""
    before = _layer_figures(src, ref_dir, ref, prompts, smoothing, cancel, {}, refine=False)
    after = _layer_figures(src, ref_dir, ref, prompts, smoothing, cancel, candidates, refine=False)
    chosen: dict[str, tuple[int, ...]] = {}
    for net, kl in measured.items():
        units = {k: sorted(expand([k]) & candidates.keys()) for k in before if k.startswith(net + ".")}
        cost = {k: sum(reads_per_frame(n, groups) for n in names) for k, names in units.items() if names}
        mine = {k: v for k, v in before.items() if k.startswith(net + ".")}
        for k in choose_splits(mine, after, kl, SPLIT_AIM * bound, cost):
            chosen.update((n, candidates[n]) for n in units[k])
    return chosen or dict(candidates)


def _outlier_candidates(src: Path, groups: int) -> dict[str, tuple[int, ...]]:
    """Every Linear's outlier input channels (q8_split.py), from the smoothing's calibration pass over the
    checkpoint's own weights (smoothing moves no channel index)."""
    ckpt = Checkpoint.open(src)
    try:
        return q8_split.outlier_channels(smooth.calibrate(ckpt), groups)
    finally:
        ckpt.close()


def move_talker_part(src: Path, writer) -> None:
    """Put a measured talker part (a talker-only bundle made by the check) into the bundle being written: its files
    moved (the check's folder is removed afterwards), its part record and 8-bit format copied."""
    manifest = read_json_object(src / MANIFEST, ConvertError)
    part = TalkerPart.from_manifest(manifest["parts"]["talker"], f"The manifest of {src} is damaged: its 'talker' part")
    for rel in manifest["files"]:
        target = writer.path(rel)
        try:
            os.replace(src / rel, target)
        except OSError:  # another file system
            shutil.copyfile(src / rel, target)
    writer.write_record(part)
    if "q8_format" in manifest:
        writer.manifest["q8_format"] = manifest["q8_format"]
