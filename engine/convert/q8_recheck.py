"""The 8-bit check of a bundle made before it (`qwen3tts models check`, the Models dialog's offer): the bundle's own
talker part is measured against the float model of the checkpoint it came from; within the bound, its figures are
added to its manifest and nothing else changes; otherwise its talker part is replaced by the one the check made
(some Linears fp32), or the bundle is converted again as a float bundle, as a conversion would have.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..errors import Cancelled, ConvertError
from ..io.fileio import write_own_file
from ..io.json_file import read_json_object
from ..runtime.bundle import MANIFEST, Bundle
from ..runtime.bundle_writer import STORE_RECORD, BundleWriter
from ..runtime.manifest_parts import TalkerPart
from ..runtime.q8_check_record import Q8CheckRecord
from .checkpoint import Checkpoint
from .q8_check import CheckOutcome, check_folder, check_q8, move_talker_part

Progress = Callable[[float, str], None]


def check_q8_bundle(bundle_dir: str | Path, checkpoint: str | Path, progress: Progress | None = None,
                 cancel: Callable[[], bool] | None = None) -> Q8CheckRecord:
    """Check the 8-bit bundle at `bundle_dir` against `checkpoint` (the one it was converted from) and record the
    result in it (module docstring). Returns the record."""
    bundle_dir, checkpoint = Path(bundle_dir), Path(checkpoint)
    bundle = Bundle.open(bundle_dir)
    if bundle.precision != "q8":
        raise ConvertError(f"{bundle_dir} is a {bundle.precision} bundle; only 8-bit bundles are checked")
    bundle.record(TalkerPart)  # a damaged part is refused before the hour of measuring
    ckpt = Checkpoint.open(checkpoint)
    try:
        if ckpt.config != bundle.config:
            raise ConvertError(f"{checkpoint} is not the checkpoint {bundle_dir} was converted from (their "
                               "config.json differ); give the folder it came from")
    finally:
        ckpt.close()

    def report(fraction: float, message: str) -> None:
        if cancel is not None and cancel():
            raise Cancelled("check cancelled")
        if progress is not None:
            progress(fraction, message)

    with check_folder(bundle_dir) as work:
        def stop() -> None:
            if cancel is not None and cancel():
                raise Cancelled("check cancelled")

        # the bundle is measured as it is; any new talker part is today's (smoothed, even where this one is not)
        outcome = check_q8(checkpoint, work, lambda f, m: report(0.9 * f, m), stop, True, existing=bundle_dir)
        report(0.9, "writing the result")
        if outcome.record.outcome == "float":
            _convert_float(bundle_dir, checkpoint, outcome.record, report)
        elif outcome.talker_bundle == bundle_dir:
            manifest = dict(bundle.manifest)
            manifest["q8_check"] = outcome.record.to_json()
            write_own_file(bundle_dir / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8"))
        else:
            _replace_talker(bundle, checkpoint, outcome)
    report(1.0, "done")
    return outcome.record


def _talker_files(bundle: Bundle) -> set[str]:
    part = bundle.record(TalkerPart)
    return ({f"{g}.{ext}" for g in (part.talker_graph, part.cp_graph) for ext in ("param", "bin")}
            | {f"{t}.npy" for t in (part.codec_table, part.cp_codec_table)})


def _kept_store_record(bundle_dir: Path) -> bytes | None:
    try:
        return (bundle_dir / STORE_RECORD).read_bytes()
    except OSError:
        return None


def _restore_store_record(bundle_dir: Path, record: bytes | None) -> None:
    if record is not None:
        write_own_file(bundle_dir / STORE_RECORD, record)


def _replace_talker(bundle: Bundle, checkpoint: Path, outcome: CheckOutcome) -> None:
    """The bundle written again with the check's talker part and every other file as it was."""
    store_record = _kept_store_record(bundle.path)
    skip = _talker_files(bundle)
    with BundleWriter(bundle.path, overwrite=True, protect=[checkpoint]) as writer:
        for key, value in bundle.manifest.items():
            if key not in ("files", "parts", "q8_format", "q8_check"):
                writer.manifest[key] = value
        for rel in bundle.manifest["files"]:
            if rel not in skip:
                writer.copy_file(bundle.file(rel), rel)
        for name, part in bundle.manifest["parts"].items():
            if name != "talker":
                writer.set_part(name, part)
        move_talker_part(outcome.talker_bundle, writer)
        writer.manifest["q8_check"] = outcome.record.to_json()
        writer.finish()
    _restore_store_record(bundle.path, store_record)


def _convert_float(bundle_dir: Path, checkpoint: Path, record: Q8CheckRecord, report: Progress) -> None:
    """8-bit cannot get within the bound: the bundle becomes the checkpoint's float (fp32) bundle, recorded."""
    from . import convert_checkpoint

    store_record = _kept_store_record(bundle_dir)
    convert_checkpoint(checkpoint, bundle_dir, "fp32", overwrite=True, check=False,
                       progress=lambda f, m: report(0.9 + 0.1 * f, f"converting to fp32: {m}"))
    manifest = read_json_object(bundle_dir / MANIFEST, ConvertError)
    manifest["q8_check"] = record.to_json()
    write_own_file(bundle_dir / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8"))
    _restore_store_record(bundle_dir, store_record)
