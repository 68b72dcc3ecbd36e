"""How far each Linear's 8-bit product alone moves its network's logits: the 8-bit check's per-layer measurement
(q8_check.py promotes the Linears that move them most).

In numpy, over the weights the converter quantizes (smoothed, smooth.py): the network runs in fp32 with exactly
one Linear computed as ncnn's int8 Gemm computes it (q8.reference_matmul, held to ncnn by tests/test_q8.py), on
the check's own teacher-forced rows; the figure is the sampling KL of the logits against the all-fp32 run
(q8_check.sampling_kl). One layer changed at a time, the layers before it are not recomputed: each layer's input
is kept from the fp32 run. A Linear whose outlier input channels the bundle splits off (q8_split.py) is computed as
its layers compute it (q8.split_reference_matmul), so what is measured is the error left after the split.

Linear names are the converter's (talker.py `linear_name`): "talker.<layer>.<site>", "talker.head",
"code_predictor.projection", "code_predictor.<layer>.<site>", "code_predictor.head.<g>" (site: qkv, o, gate_up,
down).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from ..runtime import q8
from .checkpoint import Checkpoint
from .stack_forward import CODE_PREDICTOR, SITES, TALKER, StackForward, site_weights, stack_shape

Kl = Callable[[np.ndarray, np.ndarray], float]
REFINE_SHARE = 0.9  # of the per-layer KL sum: the layers measured Linear by Linear (_sweep)
REFINE_LAYERS = 6
PROJECTION = "talker.code_predictor.small_to_mtp_projection."


def linear_name(net: str, layer: int | None, site: str) -> str:
    """The name a Linear has in the check's record and the converter's promotion set."""
    return f"{net}.{site}" if layer is None else f"{net}.{layer}.{site}"


class _Weights:
    """The checkpoint's (smoothed) tensors read once as float32, and their int8 forms made once."""

    def __init__(self, ckpt: Checkpoint):
        self.main = ckpt.main
        self._f: dict[str, np.ndarray] = {}
        self._q: dict[tuple[tuple[str, ...], tuple[int, ...]], tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}

    def get(self, name: str) -> np.ndarray:
        if name not in self._f:
            self._f[name] = self.main.get(name)
        return self._f[name]

    def has(self, name: str) -> bool:
        return name in self.main

    def int8(self, x: np.ndarray, names: list[str], channels: tuple[int, ...] = ()) -> np.ndarray:
        """x @ concat(names).T as the int8 Gemm computes it (one scale per input row and per output channel), with
        the input channels `channels` split off into fp32 (q8_split.py)."""
        key = (tuple(names), channels)
        if key not in self._q:
            w = np.concatenate([self.get(n) for n in names])
            outlier_w = None
            if channels:
                w, outlier_w = q8.split_weights(w, channels)
            self._q[key] = (*q8.quantize(w), outlier_w)
        q, scale, outlier_w = self._q[key]
        biases = [n[:-len("weight")] + "bias" for n in names]
        bias = None
        if any(self.has(b) for b in biases):
            bias = np.concatenate([self.get(b) if self.has(b) else np.zeros(self.get(n).shape[0], np.float32)
                                   for b, n in zip(biases, names, strict=True)])
        rows = x.reshape(-1, x.shape[-1])
        if outlier_w is not None:
            y = q8.split_reference_matmul(rows, q, scale, bias, channels, outlier_w)
        else:
            y = q8.reference_matmul(rows, q, scale, bias)
        return y.reshape(*x.shape[:-1], -1)


def _sweep(forward: StackForward, w: _Weights, x: np.ndarray, net: str,
           logits: Callable[[np.ndarray], np.ndarray], kl: Kl, cancel: Callable[[], None],
           split: Mapping[str, tuple[int, ...]], refine: bool = True) -> dict[str, float]:
    """KL of the logits with one decoder layer's four Linears 8-bit, per layer; then (refine), for the layers that
    hold most of it (REFINE_SHARE of the sum, at most REFINE_LAYERS), with one Linear 8-bit, per Linear. Entries are
    named by Linear where refined, by layer ("talker.5": its four Linears) elsewhere. Two levels: one Linear at a
    time costs 4 x layers^2 / 2 layer passes (full-size talker: 1624, ~10 min on 2 busy cores)."""
    layers = forward.s.layers
    inputs = []
    for i in range(layers):
        inputs.append(x)
        x = forward.layer(i, x)
    ref = logits(forward.final(x))

    def kl_from(i: int, site: str | None) -> float:
        cancel()

        def linear(layer: int, at: str, a: np.ndarray, names: list[str]) -> np.ndarray | None:
            if layer != i or site not in (None, at):
                return None
            return w.int8(a, names, tuple(split.get(linear_name(net, layer, at), ())))

        y = forward.layer(i, inputs[i], linear)
        for j in range(i + 1, layers):
            y = forward.layer(j, y)
        return kl(ref, logits(forward.final(y)))

    whole = {i: kl_from(i, None) for i in range(layers)}
    refined: list[int] = []
    covered, total = 0.0, sum(whole.values())
    for i in sorted(whole, key=lambda i: -whole[i]):
        if not refine or len(refined) >= REFINE_LAYERS or covered >= REFINE_SHARE * total:
            break
        refined.append(i)
        covered += whole[i]
    out: dict[str, float] = {}
    for i in range(layers):
        if i in refined:
            out.update({linear_name(net, i, site): kl_from(i, site) for site in SITES})
        else:
            out[f"{net}.{i}"] = whole[i]
    return out


def expand(names: Iterable[str]) -> frozenset[str]:
    """Linear names with every whole-layer name ("talker.5") replaced by its four Linears."""
    out = set()
    for name in names:
        net, _, rest = name.partition(".")
        out.update({f"{name}.{site}" for site in SITES} if rest.isdigit() else {name})
    return frozenset(out)


def talker_sensitivity(ckpt: Checkpoint, rows: np.ndarray, first: int, codebook: int, kl: Kl,
                       cancel: Callable[[], None], split: Mapping[str, tuple[int, ...]] | None = None,
                       refine: bool = True) -> dict[str, float]:
    """rows: the talker's input rows (L, H) of one prompt; first: the position whose output gives frame 0's code-0
    logits (every later position gives the next frame's); split: the Linears' outlier channels split off
    (q8_split.py); refine: per Linear in the layers holding most of the KL. Returns the KL per Linear or layer
    (_sweep)."""
    split = split or {}
    w = _Weights(ckpt)
    shape = stack_shape(ckpt.talker_config, "talker")
    head = "talker.codec_head.weight"
    forward = StackForward(w.get, w.has, TALKER, shape, rows.shape[0])

    def logits(h: np.ndarray) -> np.ndarray:
        return (h[0, first:] @ w.get(head).T)[:, :codebook]

    x = rows[None].astype(np.float32)
    out = _sweep(forward, w, x, "talker", logits, kl, cancel, split, refine)
    for i in range(shape.layers):
        x = forward.layer(i, x)
    hidden = forward.final(x)[0, first:]
    ref = (hidden @ w.get(head).T)[:, :codebook]
    name = linear_name("talker", None, "head")
    out[name] = kl(ref, w.int8(hidden, [head], tuple(split.get(name, ())))[:, :codebook])
    return out


def code_predictor_sensitivity(ckpt: Checkpoint, inputs: np.ndarray, kl: Kl, cancel: Callable[[], None],
                               split: Mapping[str, tuple[int, ...]] | None = None, refine: bool = True
                               ) -> dict[str, float]:
    """inputs: (frames, groups, talker width) rows of each frame's sequence (hidden, code 0's row, codes 1..14's
    rows); split and refine as talker_sensitivity's. Logits: head g at position g + 1."""
    split = split or {}
    projection = linear_name("code_predictor", None, "projection")
    w = _Weights(ckpt)
    shape = stack_shape(ckpt.talker_config["code_predictor_config"], "code predictor")
    groups = inputs.shape[1]
    heads = [f"talker.code_predictor.lm_head.{g}.weight" for g in range(groups - 1)]
    x = inputs.astype(np.float32)
    has_proj = w.has(PROJECTION + "weight")

    def project(a: np.ndarray, int8: bool) -> np.ndarray:
        if not has_proj:
            return a
        if int8:
            return w.int8(a, [PROJECTION + "weight"], tuple(split.get(projection, ())))
        y = a @ w.get(PROJECTION + "weight").T
        return y + w.get(PROJECTION + "bias") if w.has(PROJECTION + "bias") else y

    def logits(h: np.ndarray) -> np.ndarray:
        return np.stack([h[:, g + 1] @ w.get(heads[g]).T for g in range(groups - 1)], axis=1)

    forward = StackForward(w.get, w.has, CODE_PREDICTOR, shape, groups)
    out = _sweep(forward, w, project(x, False), "code_predictor", logits, kl, cancel, split, refine)
    y = project(x, False)
    for i in range(shape.layers):
        y = forward.layer(i, y)
    final = forward.final(y)
    ref = logits(final)
    for g in range(groups - 1):
        got = ref.copy()
        name = linear_name("code_predictor", None, f"head.{g}")
        got[:, g] = w.int8(final[:, g + 1], [heads[g]], tuple(split.get(name, ())))
        out[name] = kl(ref, got)
    if has_proj:
        y = project(x, True)
        for i in range(shape.layers):
            y = forward.layer(i, y)
        out[projection] = kl(ref, logits(forward.final(y)))
    return out


def linear_sizes(ckpt: Checkpoint) -> dict[str, int]:
    """Weight count of every Linear the converter makes, by name."""
    main = ckpt.main
    cfg = ckpt.talker_config
    out = {}
    for net, prefix, sub in (("talker", TALKER, cfg), ("code_predictor", CODE_PREDICTOR, cfg["code_predictor_config"])):
        for i in range(int(sub["num_hidden_layers"])):
            for site in SITES:
                out[linear_name(net, i, site)] = sum(int(np.prod(main.shape(n))) for n in site_weights(prefix, i, site))
        for i in range(int(sub["num_hidden_layers"])):
            out[f"{net}.{i}"] = sum(out[linear_name(net, i, site)] for site in SITES)
    out[linear_name("talker", None, "head")] = int(np.prod(main.shape("talker.codec_head.weight")))
    if PROJECTION + "weight" in main:
        out[linear_name("code_predictor", None, "projection")] = int(np.prod(main.shape(PROJECTION + "weight")))
    for g in range(int(cfg.get("num_code_groups", 16)) - 1):
        name = f"talker.code_predictor.lm_head.{g}.weight"
        out[linear_name("code_predictor", None, f"head.{g}")] = int(np.prod(main.shape(name)))
    return out
