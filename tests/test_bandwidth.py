"""Weight bytes a call reads, counted from the graph (engine/runtime/bandwidth.py), against hand counts and the
full-size shapes."""

from __future__ import annotations

import math

import pytest

from engine.nets.weight_reads import frame_weights
from engine.runtime.bandwidth import floor_and_share, measure_read_bandwidth, weights_read
from engine.runtime.bundle import Bundle
from tests.bundles import MODELS, bundle_for

# in0 -> [q8 Gemm 8x4 + scale table] -> a -> [fp Gemm 3x8] -> out_a ; in0 -> [InnerProduct 5x4, int8] -> out_b;
# a -> [head Gemm 2x8] -> logits_0
GRAPH = """7767517
7 8
Input in0 0 1 in0
Split sp 1 2 in0 x0 x1
Gemm g1 1 1 x0 g1 2=0 3=1 4=0 5=1 6=0 7=0 8=8 9=4 10=-1 18=1
MemoryData scale 0 1 scale 0=8 1=1
BinaryOp mul 2 1 g1 scale a 0=2
Gemm g2 1 1 a out_a 5=1 8=3 9=8 18=0 -23300=2,1,2
InnerProduct ip 1 1 x1 out_b 0=5 1=0 2=20 8=2
Gemm logits_0_gemm 1 1 a logits_0 5=1 8=2 9=8 18=1
"""


def test_counts_only_the_layers_an_extract_needs():
    q8, scale = 8 * 4, 8 * 4
    assert weights_read(GRAPH, ["out_a"], float_bytes=4) == q8 + scale + 3 * 8 * 4
    assert weights_read(GRAPH, ["out_a"], float_bytes=2) == q8 + scale + 3 * 8 * 2
    assert weights_read(GRAPH, ["out_b"], float_bytes=4) == 20  # int8 InnerProduct
    assert weights_read(GRAPH, ["logits_0"], float_bytes=4) == q8 + scale + 16
    # shared layers are read once per call
    assert weights_read(GRAPH, ["out_a", "logits_0"], float_bytes=4) == q8 + scale + 96 + 16
    assert weights_read(GRAPH, ["logits_0"], float_bytes=4, beside=["out_a"]) == 16  # what the head adds
    assert weights_read(GRAPH, ["in0", "nothing"], float_bytes=4) == 0


def test_full_size_q8_talker_and_code_predictor_bytes(fullsize_shapes):
    talker, cp = fullsize_shapes
    # 28 layers of (1024x4096 qkv, 2048x1024 o, 2 x 1024x3072 gate/up, 3072x1024 down) + the 3072-way codec head
    layer = 1024 * 4096 + 2048 * 1024 + 3 * 1024 * 3072
    assert talker == pytest.approx(28 * layer + 3072 * 1024, rel=0.01)
    assert cp == pytest.approx(5 * layer, rel=0.01)


@pytest.fixture
def fullsize_shapes():
    """The int8 weight bytes of one call through a full-size-shaped talker and code predictor, written in the
    graph form the converter uses (one Gemm per Linear with its scale table)."""
    def stack(layers, head):
        lines, prev = [], "in0"
        for i in range(layers):
            for j, (n, k) in enumerate(((4096, 1024), (1024, 2048), (3072, 1024), (3072, 1024), (1024, 3072))):
                out = f"l{i}_{j}"
                lines.append(f"Gemm {out} 1 1 {prev} {out} 5=1 8={n} 9={k} 18=1")
                prev = out
        if head:
            lines.append(f"Gemm head 1 1 {prev} logits 5=1 8=3072 9=1024 18=1")
            prev = "logits"
        return "7767517\n0 0\nInput in0 0 1 in0\n" + "\n".join(lines) + "\n", prev

    talker, t_out = stack(28, True)
    cp, c_out = stack(5, False)
    return weights_read(talker, [t_out], 4), weights_read(cp, [c_out], 4)


def test_floor_and_share():
    floor, share = floor_and_share(1.655e9, 0.145, 18e9)
    assert floor == pytest.approx(0.09194, rel=1e-3)
    assert share == pytest.approx(0.634, rel=1e-3)
    assert all(math.isnan(v) for v in floor_and_share(1e9, 0.1, 0.0))


def test_bandwidth_reads_the_bytes_it_says():
    bw = measure_read_bandwidth(2, repeats=1, total_bytes=8 << 20)
    assert bw.readers == 2 and bw.array_bytes == 8 << 20
    assert bw.one_reader > 0 and bw.all_readers > 0


def test_heads_are_counted_whatever_their_layers(tmp_path):
    """A q8 bundle's heads are an int8 Gemm with a scale table, a head the 8-bit check kept float is an
    InnerProduct: both count in full (the heads were counted by the name "logits_" of their layers, which gave a
    float head nothing and left the scale tables out)."""
    from engine.convert import convert_checkpoint
    from engine.nets.talker import net_precision, talker_part

    dest = convert_checkpoint(MODELS / "tiny06b", tmp_path / "b", "q8", parts=["talker"], check=False,
                              promote=["code_predictor.head.0"])
    bundle = Bundle.open(dest)
    part = talker_part(bundle)
    n, k = part.codebook_size, part.code_predictor.hidden
    float_bytes = 4 if net_precision(bundle, part) == "fp32" else 2
    heads = part.num_code_groups - 1
    assert frame_weights(bundle).code_predictor_heads == (heads - 1) * (n * k + 4 * n) + n * k * float_bytes


@pytest.mark.parametrize("precision", ["fp32", "q8"])
def test_frame_weights_count_each_code_predictor_call(precision):
    """Per frame the code predictor reads its layers once per code (15) and each head once; float bundles make
    one more call for position 0 (every layer but the last one's attention output and MLP), q8 bundles run
    positions 0 and 1 together."""
    bundle = Bundle.open(bundle_for("tiny06b", precision, parts=("talker",)))
    w = frame_weights(bundle)
    layers = int(bundle.part("talker")["code_predictor"]["layers"])
    assert w.code_predictor_layers > 0 and w.code_predictor_heads > 0 and w.talker > 0
    assert w.total == w.talker + w.code_predictor
    position_0 = w.code_predictor - 15 * w.code_predictor_layers - w.code_predictor_heads
    if precision == "q8":
        assert w.code_predictor_calls == 15 and position_0 == 0
    else:
        assert w.code_predictor_calls == 16
        assert w.code_predictor_layers * (layers - 1) / layers < position_0 < w.code_predictor_layers
