"""The bundle manifest's parts as typed records: the converter writes one (to_manifest), a network reads it
(from_manifest), and mypy checks both sides against the one declaration, where the manifest was a table of string
keys written in convert/ and read in nets/. Reading keeps old bundles opening: a key they lack has its default,
a key that must be there is a BundleError naming it (Bundle.part's tables raise it), a value of the wrong type is
a BundleError saying so (manifest_values.py holds those checked readers).

Every part of a text-to-speech bundle is declared this way (SpeakerPart, TalkerPart, CodecDecoderPart,
CodecEncoderPart, TextPart); Bundle.record(TalkerPart) reads one, its damage one BundleError line naming the bundle,
the part and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, Self

from ..errors import BundleError
from .manifest_values import count, names, positive, real, size, table, text, whole, wholes, window


class ManifestPart(Protocol):
    """A record named PART among the manifest's parts: BundleWriter.write_record writes it (to_manifest),
    Bundle.record reads it (from_manifest)."""

    PART: ClassVar[str]

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str) -> Self: ...

    def to_manifest(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SpeakerPart:
    """The speaker encoder (x-vector network) of a Base model; `present` False for the other kinds, which have
    none (then only model_type is recorded)."""

    PART: ClassVar[str] = "speaker"

    present: bool
    model_type: str | None = None  # tts_model_type of the checkpoint ("base", "custom_voice", ...)
    graph: str = ""  # the net's .param/.bin name in the bundle
    input: str = ""  # blob names
    output: str = ""
    mel_dim: int = 0  # mel channels in
    enc_dim: int = 0  # x-vector length out (the talker's width)
    sample_rate: int = 0
    min_frames: int = 0  # the fewest mel frames the network takes
    channels: tuple[int, ...] = ()

    def to_manifest(self) -> dict[str, Any]:
        if not self.present:
            return {"present": False, "model_type": self.model_type}
        return {"present": True, "graph": self.graph, "input": self.input, "output": self.output,
                "mel_dim": self.mel_dim, "enc_dim": self.enc_dim, "sample_rate": self.sample_rate,
                "min_frames": self.min_frames, "channels": list(self.channels)}

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str = "the speaker part") -> SpeakerPart:
        present = info.get("present", False)
        if not isinstance(present, bool):
            raise BundleError(f"{where}: 'present' is not true or false; convert the checkpoint again.")
        if not present:
            model_type = info.get("model_type")
            if model_type is not None and not isinstance(model_type, str):
                raise BundleError(f"{where}: 'model_type' is not a name ({model_type!r}); convert the checkpoint again.")
            return cls(False, model_type)
        channels = info.get("channels", [])
        if not isinstance(channels, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in channels):
            raise BundleError(f"{where}: 'channels' is not a list of whole numbers; convert the checkpoint again.")
        return cls(True, None, text(info, "graph", where), text(info, "input", where), text(info, "output", where),
                   whole(info, "mel_dim", where), whole(info, "enc_dim", where), whole(info, "sample_rate", where),
                   whole(info, "min_frames", where), tuple(channels))


@dataclass(frozen=True)
class StackShape:
    """One decoder stack's shape (the talker's, the code predictor's)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float
    rope_theta: float

    def to_manifest(self) -> dict[str, Any]:
        return {"layers": self.layers, "hidden": self.hidden, "heads": self.heads, "kv_heads": self.kv_heads,
                "head_dim": self.head_dim, "intermediate": self.intermediate, "eps": self.eps,
                "rope_theta": self.rope_theta}

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str) -> StackShape:
        return cls(positive(info, "layers", where), positive(info, "hidden", where), positive(info, "heads", where),
                   positive(info, "kv_heads", where), positive(info, "head_dim", where),
                   positive(info, "intermediate", where), real(info, "eps", where), real(info, "rope_theta", where))


@dataclass(frozen=True)
class TalkerPart:
    """The talker and the code predictor: their graphs, shapes, embedding tables, how their Linears are stored, and
    what the 8-bit check kept float (engine/convert/q8_check.py writes this part back unchanged but for those)."""

    PART: ClassVar[str] = "talker"

    talker_graph: str  # the nets' .param/.bin names in the bundle
    cp_graph: str
    talker: StackShape
    code_predictor: StackShape
    num_code_groups: int  # 16: code 0 from the talker + 15 from the code predictor
    vocab_size: int  # the talker's codec vocabulary
    codebook_size: int  # each code predictor head's
    small_to_mtp_projection: bool
    codec_table: str  # tables: the code-0 embedding, the code predictor's (groups-1, codebook, hidden)
    cp_codec_table: str
    blobs: Mapping[str, Any]  # blob names the converter used (informative; the nets name them in code)
    codec_eos_token_id: int | None
    fp16_weight_layers: int = 0  # Linear weights stored fp16 / fp32 / int8 (engine/convert/talker.py)
    fp32_weight_layers: int = 0
    q8_weight_layers: int = 0
    outlier_smoothing: Mapping[str, Any] | None = None  # smooth.py's record; None: not smoothed
    promoted_layers: tuple[str, ...] = ()  # q8 Linears the 8-bit check kept float
    promoted_fp32_layers: tuple[str, ...] = ()  # of them, those stored fp32
    # q8 Linears whose outlier input channels are computed apart in fp32 (engine/convert/q8_split.py), by name
    # (engine/convert/q8_layers.py linear_name); absent from bundles that split none
    split_channels: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def to_manifest(self) -> dict[str, Any]:
        out = {
            "talker_graph": self.talker_graph, "cp_graph": self.cp_graph,
            "talker": self.talker.to_manifest(), "code_predictor": self.code_predictor.to_manifest(),
            "num_code_groups": self.num_code_groups, "vocab_size": self.vocab_size,
            "codebook_size": self.codebook_size, "small_to_mtp_projection": self.small_to_mtp_projection,
            "tables": {"codec": self.codec_table, "cp_codec": self.cp_codec_table},
            "blobs": dict(self.blobs), "codec_eos_token_id": self.codec_eos_token_id,
            "fp16_weight_layers": self.fp16_weight_layers, "fp32_weight_layers": self.fp32_weight_layers,
            "q8_weight_layers": self.q8_weight_layers,
            "outlier_smoothing": None if self.outlier_smoothing is None else dict(self.outlier_smoothing),
            "promoted_layers": list(self.promoted_layers), "promoted_fp32_layers": list(self.promoted_fp32_layers),
        }
        if self.split_channels:
            out["split_channels"] = {name: list(channels) for name, channels in self.split_channels.items()}
        return out

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str = "the talker part") -> TalkerPart:
        tables = table(info, "tables", where)
        projection = info.get("small_to_mtp_projection", False)
        if not isinstance(projection, bool):
            raise BundleError(f"{where}: 'small_to_mtp_projection' is not true or false; convert the checkpoint again.")
        eos = info.get("codec_eos_token_id")
        if eos is not None and (isinstance(eos, bool) or not isinstance(eos, int)):
            raise BundleError(f"{where}: 'codec_eos_token_id' is not a whole number ({eos!r}); convert the "
                              "checkpoint again.")
        blobs = info.get("blobs", {})
        smoothing = info.get("outlier_smoothing")
        for key, value in (("blobs", blobs), ("outlier_smoothing", smoothing)):
            if value is not None and not isinstance(value, Mapping):
                raise BundleError(f"{where}: {key!r} is not a table of values; convert the checkpoint again.")
        talker = StackShape.from_manifest(table(info, "talker", where), f"{where}, its talker")
        code_predictor = StackShape.from_manifest(table(info, "code_predictor", where), f"{where}, its code predictor")
        groups = positive(info, "num_code_groups", where)
        return cls(
            text(info, "talker_graph", where), text(info, "cp_graph", where), talker, code_predictor, groups,
            positive(info, "vocab_size", where), positive(info, "codebook_size", where), projection,
            text(tables, "codec", f"{where}, its tables"), text(tables, "cp_codec", f"{where}, its tables"),
            blobs or {}, eos,
            count(info, "fp16_weight_layers", where), count(info, "fp32_weight_layers", where),
            count(info, "q8_weight_layers", where), smoothing,
            names(info, "promoted_layers", where), names(info, "promoted_fp32_layers", where),
            _split_channels(info, where, talker, code_predictor, groups),
        )


def _input_width(name: str, talker: StackShape, code_predictor: StackShape, groups: int) -> int | None:
    """The input width of the q8 Linear called `name` (engine/convert/q8_layers.py linear_name), None if there is
    no such Linear."""
    net, _, rest = name.partition(".")
    shape = {"talker": talker, "code_predictor": code_predictor}.get(net)
    if shape is None:
        return None
    if rest == "head" and net == "talker":
        return talker.hidden
    if rest == "projection" and net == "code_predictor":
        return talker.hidden
    head, _, g = rest.partition(".")
    if head == "head" and net == "code_predictor":
        return code_predictor.hidden if g.isdigit() and g == str(int(g)) and int(g) < groups - 1 else None
    layer, _, site = rest.partition(".")
    if not layer.isdigit() or layer != str(int(layer)) or int(layer) >= shape.layers:
        return None
    return {"qkv": shape.hidden, "gate_up": shape.hidden, "o": shape.heads * shape.head_dim,
            "down": shape.intermediate}.get(site)


def _split_channels(info: Mapping[str, Any], where: str, talker: StackShape, code_predictor: StackShape,
                    groups: int) -> dict[str, tuple[int, ...]]:
    """split_channels: Linear name -> ascending distinct input channels of that Linear ({} when absent)."""
    value = info.get("split_channels", {})
    if not isinstance(value, Mapping):
        raise BundleError(f"{where}: 'split_channels' is not a table of values; convert the checkpoint again.")
    out = {}
    for name, channels in value.items():
        width = _input_width(name, talker, code_predictor, groups) if isinstance(name, str) else None
        if width is None:
            raise BundleError(f"{where}: 'split_channels' names no Linear of this bundle ({name!r}); convert the "
                              "checkpoint again.")
        if not isinstance(channels, list) or not channels or not all(
                type(c) is int and 0 <= c < width for c in channels) or channels != sorted(set(channels)):
            raise BundleError(f"{where}: 'split_channels' of {name} is not a list of distinct input channels in "
                              f"ascending order below {width} ({channels!r}); convert the checkpoint again.")
        out[name] = tuple(channels)
    return out


@dataclass(frozen=True)
class ConvState:
    """A causal convolution's carried input tail in the streaming decoder: graph input `name`, output `name`_out."""

    name: str
    channels: int
    width: int


@dataclass(frozen=True)
class CodecDecoderPart:
    """The speech-tokenizer decoder (codes -> waveform): its graph, codebook table and transformer shape, the
    convolution states a stream carries between calls, and the codebooks' sizes and rows in the table."""

    PART: ClassVar[str] = "codec_decoder"

    graph: str
    table: str
    num_quantizers: int
    codebook_dim: int  # a latent frame's width
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    rope_theta: float
    sliding_window: int | None
    past: int  # frames of transformer context a stream keeps
    upsample: int  # samples per frame
    states: tuple[ConvState, ...]
    outputs: tuple[str, ...]  # blobs pulled, in graph order
    bf16_layers: bool  # the graph carries the per-layer marks that make bf16 storage safe (absent before them)
    codebook_sizes: tuple[int, ...]
    codebook_offsets: tuple[int, ...]  # each codebook's first row in the table

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "graph": self.graph, "table": self.table, "num_quantizers": self.num_quantizers,
            "codebook_dim": self.codebook_dim, "layers": self.layers, "heads": self.heads, "kv_heads": self.kv_heads,
            "head_dim": self.head_dim, "rope_theta": self.rope_theta, "sliding_window": self.sliding_window,
            "past": self.past, "upsample": self.upsample,
            "states": [{"name": s.name, "channels": s.channels, "width": s.width} for s in self.states],
            "outputs": list(self.outputs),
        }
        if self.bf16_layers:
            out["bf16_layers"] = True
        out["codebook_sizes"] = list(self.codebook_sizes)
        out["codebook_offsets"] = list(self.codebook_offsets)
        return out

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str = "the codec_decoder part") -> CodecDecoderPart:
        states = info["states"]
        if not isinstance(states, list) or not all(isinstance(s, Mapping) for s in states):
            raise BundleError(f"{where}: 'states' is not a list of tables; convert the checkpoint again.")
        outputs = info["outputs"]
        if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
            raise BundleError(f"{where}: 'outputs' is not a list of names; convert the checkpoint again.")
        bf16_layers = info.get("bf16_layers", False)  # absent before the marks
        if not isinstance(bf16_layers, bool):
            raise BundleError(f"{where}: 'bf16_layers' is not true or false; convert the checkpoint again.")
        part = cls(
            text(info, "graph", where), text(info, "table", where), positive(info, "num_quantizers", where),
            positive(info, "codebook_dim", where), positive(info, "layers", where), positive(info, "heads", where),
            positive(info, "kv_heads", where), positive(info, "head_dim", where), real(info, "rope_theta", where),
            window(info, where), size(info, "past", where),
            positive(info, "upsample", where),
            tuple(ConvState(text(s, "name", f"{where}, its states"), positive(s, "channels", f"{where}, its states"),
                            positive(s, "width", f"{where}, its states")) for s in states),
            tuple(outputs), bf16_layers,
            wholes(info, "codebook_sizes", where), wholes(info, "codebook_offsets", where),
        )
        if len(part.codebook_sizes) != part.num_quantizers or len(part.codebook_offsets) != part.num_quantizers:
            raise BundleError(f"{where}: it lists {len(part.codebook_sizes)} codebook sizes and "
                              f"{len(part.codebook_offsets)} offsets for {part.num_quantizers} codebooks; convert the "
                              "checkpoint again.")
        return part


@dataclass(frozen=True)
class CodecEncoderPart:
    """The speech-tokenizer encoder (24 kHz audio -> codes): its four graphs (convolutions, transformer,
    downsampling, residual quantizer), the codebook table, and the transformer's and framing's sizes."""

    PART: ClassVar[str] = "codec_encoder"

    conv_net: str
    tf_net: str
    down_net: str
    layers: int
    rvq_net: str
    codebooks: str  # the (levels, codebook_size, codebook_dim) table
    hidden: int
    heads: int
    head_dim: int
    rope_theta: float
    sliding_window: int | None  # None: plain causal attention (engine/convert/codec_encoder.py says why)
    hop: int  # samples per 25 Hz row
    downsample_stride: int  # 25 Hz rows per code frame
    samples_per_frame: int
    receptive_field: int  # samples of left context a chunk needs
    semantic_levels: int
    levels: int
    codebook_size: int
    codebook_dim: int

    def to_manifest(self) -> dict[str, Any]:
        return {
            "conv_net": self.conv_net, "tf_net": self.tf_net, "down_net": self.down_net, "layers": self.layers,
            "rvq_net": self.rvq_net, "codebooks": self.codebooks, "hidden": self.hidden, "heads": self.heads,
            "head_dim": self.head_dim, "rope_theta": self.rope_theta, "sliding_window": self.sliding_window,
            "hop": self.hop, "downsample_stride": self.downsample_stride, "samples_per_frame": self.samples_per_frame,
            "receptive_field": self.receptive_field, "semantic_levels": self.semantic_levels, "levels": self.levels,
            "codebook_size": self.codebook_size, "codebook_dim": self.codebook_dim,
        }

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str = "the codec_encoder part") -> CodecEncoderPart:
        part = cls(
            text(info, "conv_net", where), text(info, "tf_net", where), text(info, "down_net", where),
            positive(info, "layers", where), text(info, "rvq_net", where), text(info, "codebooks", where),
            positive(info, "hidden", where), positive(info, "heads", where), positive(info, "head_dim", where),
            real(info, "rope_theta", where), window(info, where), positive(info, "hop", where),
            positive(info, "downsample_stride", where), positive(info, "samples_per_frame", where),
            size(info, "receptive_field", where), size(info, "semantic_levels", where),
            positive(info, "levels", where), positive(info, "codebook_size", where),
            positive(info, "codebook_dim", where),
        )
        if part.semantic_levels > part.levels:
            raise BundleError(f"{where}: 'semantic_levels' ({part.semantic_levels}) is more than 'levels' "
                              f"({part.levels}); convert the checkpoint again.")
        return part


# the text part's token ids, in the order the converter writes them (config.json's, then talker_config's)
TEXT_IDS = ("im_start_token_id", "im_end_token_id", "assistant_token_id", "tts_pad_token_id", "tts_bos_token_id",
            "tts_eos_token_id")
CODEC_IDS = ("codec_pad_id", "codec_bos_id", "codec_eos_token_id", "codec_think_id", "codec_nothink_id",
             "codec_think_bos_id", "codec_think_eos_id")


def _id_table(info: Mapping[str, Any], key: str, where: str) -> dict[str, int | list[int]]:
    """A table of names to token ids (a speaker's may be a one-element list, as some configs store it)."""
    value = info.get(key) or {}
    if not isinstance(value, Mapping) or not all(
            type(v) is int or isinstance(v, list) and len(v) == 1 and type(v[0]) is int for v in value.values()):
        raise BundleError(f"{where}: {key!r} is not a table of token ids; convert the checkpoint again.")
    return dict(value)


def _language_ids(info: Mapping[str, Any], where: str) -> dict[str, int]:
    """codec_language_id: language name -> its codec token id (the converter has always written whole numbers)."""
    value = info.get("codec_language_id") or {}
    if not isinstance(value, Mapping) or not all(type(v) is int for v in value.values()):
        raise BundleError(f"{where}: 'codec_language_id' is not a table of token ids; convert the checkpoint again.")
    return dict(value)


MIN_POSITIONS, MAX_POSITIONS = 256, 1 << 24  # the released models have 32768; a prompt alone needs a few dozen


def _context_length(info: Mapping[str, Any], where: str) -> int:
    """max_position_embeddings (bundles made before it was recorded: 32768); one of -1 made every text "too long"."""
    positions = info.get("max_position_embeddings", 32768)
    if type(positions) is not int or not MIN_POSITIONS <= positions <= MAX_POSITIONS:
        raise BundleError(f"{where}: the context length (max_position_embeddings) is {str(positions)[:20]}, not "
                          f"{MIN_POSITIONS}-{MAX_POSITIONS}; convert the checkpoint again.")
    return positions


@dataclass(frozen=True)
class TextPart:
    """The text side: the projected text-embedding table, the tokenizer's split, the model's kind, size and
    speakers, its context length, and the special token ids of the text and codec tracks."""

    PART: ClassVar[str] = "text"

    table: str
    text_vocab: int
    hidden: int
    split_regex: str
    newline_id: int | None
    tts_model_type: str
    tts_model_size: str
    codec_vocab: int
    codebook_size: int
    num_code_groups: int
    codec_language_id: Mapping[str, int]
    spk_id: Mapping[str, int | list[int]]  # a speaker's codec id (some configs store a one-element list)
    spk_is_dialect: Mapping[str, str | Literal[False] | None]  # a speaker's dialect, or false
    max_position_embeddings: int
    text_ids: Mapping[str, int]  # TEXT_IDS the checkpoint has (assistant_token_id may be absent)
    codec_ids: Mapping[str, int]  # CODEC_IDS, all of them

    def to_manifest(self) -> dict[str, Any]:
        return {
            "table": self.table, "text_vocab": self.text_vocab, "hidden": self.hidden,
            "split_regex": self.split_regex, "newline_id": self.newline_id, "tts_model_type": self.tts_model_type,
            "tts_model_size": self.tts_model_size, "codec_vocab": self.codec_vocab,
            "codebook_size": self.codebook_size, "num_code_groups": self.num_code_groups,
            "codec_language_id": dict(self.codec_language_id), "spk_id": dict(self.spk_id),
            "spk_is_dialect": dict(self.spk_is_dialect), "max_position_embeddings": self.max_position_embeddings,
            **{k: self.text_ids[k] for k in TEXT_IDS if k in self.text_ids},
            **{k: self.codec_ids[k] for k in CODEC_IDS},
        }

    def id(self, key: str) -> int:
        """A special token id by its config.json name (TEXT_IDS, CODEC_IDS)."""
        return self.codec_ids[key] if key in CODEC_IDS else self.text_ids[key]

    @classmethod
    def from_manifest(cls, info: Mapping[str, Any], where: str = "the text part") -> TextPart:
        for key, default in (("table", "text_rows"), ("split_regex", "qwen2"), ("tts_model_type", "base"),
                             ("tts_model_size", "")):
            if not isinstance(info.get(key, default), str):
                raise BundleError(f"{where}: {key!r} is not a name ({info.get(key)!r}); convert the checkpoint again.")
        newline = info.get("newline_id")
        if newline is not None and (isinstance(newline, bool) or not isinstance(newline, int)):
            raise BundleError(f"{where}: 'newline_id' is not a whole number ({newline!r}); convert the checkpoint "
                              "again.")
        dialects = info.get("spk_is_dialect") or {}
        if not isinstance(dialects, Mapping) or not all(v is None or v is False or isinstance(v, str)
                                                        for v in dialects.values()):
            raise BundleError(f"{where}: 'spk_is_dialect' is not a table of dialect names (or false); convert the "
                              "checkpoint again.")
        return cls(
            info.get("table", "text_rows"), positive(info, "text_vocab", where), positive(info, "hidden", where),
            info.get("split_regex", "qwen2"), newline, info.get("tts_model_type", "base"),
            info.get("tts_model_size", ""), count(info, "codec_vocab", where), count(info, "codebook_size", where),
            positive(info, "num_code_groups", where) if "num_code_groups" in info else 16,
            _language_ids(info, where), _id_table(info, "spk_id", where), dict(dialects),
            _context_length(info, where),
            {k: size(info, k, where) for k in TEXT_IDS if k in info or k != "assistant_token_id"},
            {k: size(info, k, where) for k in CODEC_IDS},
        )
