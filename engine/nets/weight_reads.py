"""The weight bytes one generated frame reads, per network, counted from the bundle's graphs
(engine/runtime/bandwidth.py weights_read): the talker's step, and the code predictor's calls: one per code 1..15,
each all five layers and one of the 15 heads, plus, on float and older 8-bit bundles, a call of its own for the
talker hidden state at position 0 (every layer but the last one's attention output and MLP). q8 bundles run
positions 0 and 1 in one call (engine/runtime/stacked_graph.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.bandwidth import weights_read
from ..runtime.bundle import Bundle
from ..runtime.stacked_graph import runs_stacked
from .talker import net_precision, talker_part


@dataclass(frozen=True)
class FrameWeights:
    talker: int  # bytes per talker step
    code_predictor_layers: int  # bytes of one code-predictor call's layers (a full call, without its head)
    code_predictor_calls: int  # calls per frame
    code_predictor: int  # bytes per frame: all calls, heads included
    code_predictor_heads: int  # bytes of the 15 heads (each read once per frame)

    @property
    def total(self) -> int:
        return self.talker + self.code_predictor


def frame_weights(bundle: Bundle) -> FrameWeights:
    part = talker_part(bundle)
    float_bytes = 4 if net_precision(bundle, part) == "fp32" else 2  # fp16 / bf16 storage, or int8 in the graph
    talker_text = bundle.file(f"{part.talker_graph}.param").read_text(encoding="utf-8")
    cp_text = bundle.file(f"{part.cp_graph}.param").read_text(encoding="utf-8")
    t_layers, c_layers = part.talker.layers, part.code_predictor.layers
    t_cache = [f"{kv}_out_{i}" for i in range(t_layers) for kv in "kv"]
    c_cache = [f"{kv}_out_{i}" for i in range(c_layers) for kv in "kv"]
    heads = [f"logits_{g}" for g in range(part.num_code_groups - 1)]
    talker = weights_read(talker_text, ["hidden", "logits", *t_cache], float_bytes)
    first = weights_read(cp_text, c_cache, float_bytes)
    per_code = [weights_read(cp_text, [h, *c_cache], float_bytes) for h in heads]
    # each head's own layers (beside the other heads'): its weights, scale table and bias, int8 or kept float
    own = [weights_read(cp_text, [h], float_bytes, beside=[o for o in heads if o != h]) for h in heads]
    head_bytes = sum(own)
    full_call = per_code[0] - own[0]
    if runs_stacked(bundle, part.cp_graph):  # position 0 rides along with position 1
        return FrameWeights(talker, full_call, len(heads), sum(per_code), head_bytes)
    return FrameWeights(talker, full_call, 1 + len(heads), first + sum(per_code), head_bytes)
