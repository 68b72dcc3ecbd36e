"""`qwen3tts models`: the installed models (list, download from the hub or a mirror, remove), and --model
on every command, which takes a bundle folder or an installed model's name."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .common import ProgressBar


def cmd_models_list(args: argparse.Namespace) -> int:
    """Installed models, one line each starting with the name, on stdout; with --available the catalogue follows
    on stdout too (it is what was asked for); notes and unfinished downloads go to stderr."""
    from engine.store import CATALOGUE, WHISPER_CATALOGUE, ModelStore, format_bytes, pending_downloads

    store = ModelStore()
    installed = store.installed()
    for m in installed:
        accuracy = f" ({m.accuracy})" if m.accuracy else ""
        print(f"{m.name}  {m.precision}{accuracy}  {format_bytes(m.disk_bytes)}  {m.source}")
        if m.note:
            print(f"  ({m.note})", file=sys.stderr)
    info = sys.stderr
    if not installed:
        print(f"No models installed in {store.root} yet.", file=info)
    for p in pending_downloads(store):
        print(f"(unfinished download: {p.name}, {format_bytes(p.done_bytes)} of {format_bytes(p.total_bytes)}; "
              f"run 'qwen3tts models download {p.repo_id} --name {p.name}' to resume)", file=info)
    if args.available:
        have = {m.repo_id for m in installed}
        for e in CATALOGUE + WHISPER_CATALOGUE:
            mark = "installed" if e.repo_id in have else "available"
            sizes = ", ".join(f"{p} {format_bytes(b)}" for p, b in e.bundle_bytes.items())
            print(f"{e.name}  {mark}  download {format_bytes(e.download_bytes)}  on disk {sizes}  "
                  f"({e.abilities})")
    return 0


def cmd_models_download(args: argparse.Namespace) -> int:
    from engine.store import ModelStore, format_bytes, install

    bar = ProgressBar("download")
    t0 = time.monotonic()
    model = install(args.source, name=args.name, precision=args.precision, store=ModelStore(),
                    endpoint=args.endpoint, token=args.token, keep_checkpoint=args.keep_checkpoint,
                    progress=bar.update)
    bar.done(f"installed {model.name} ({model.precision}, {format_bytes(model.disk_bytes)}) in {model.path} "
             f"in {time.monotonic() - t0:.1f} s")
    return 0


def cmd_models_remove(args: argparse.Namespace) -> int:
    from engine.store import ModelStore, StoreError, discard_download

    store = ModelStore()
    if store.get(args.name) is None:
        if discard_download(store, args.name):
            print(f"removed the unfinished download {args.name}", file=sys.stderr)
            return 0
        raise StoreError(f"No installed model is called {args.name!r} (see 'qwen3tts models list').")
    path = store.remove(args.name)
    print(f"removed {args.name} ({path})", file=sys.stderr)
    return 0


def cmd_models_check(args: argparse.Namespace) -> int:
    """The 8-bit check of an installed bundle made before it (engine/convert/q8_recheck.py)."""
    from engine import check_q8_bundle
    from engine.store import ModelStore, StoreError

    store = ModelStore()
    model = store.get(args.name)
    if model is None:
        raise StoreError(f"No installed model is called {args.name!r} (see 'qwen3tts models list').")
    checkpoint = args.checkpoint
    if checkpoint is None:
        kept = store.root / "checkpoints" / args.name  # where 'models download --keep-checkpoint' keeps it
        if not (kept / "config.json").is_file():
            raise StoreError(f"The check compares {args.name} with the checkpoint it was converted from; give its "
                             "folder with --checkpoint DIR.")
        checkpoint = kept
    bar = ProgressBar("check")
    t0 = time.monotonic()
    record = check_q8_bundle(model.path, Path(checkpoint), progress=bar.update)
    bar.done(f"checked {args.name} in {time.monotonic() - t0:.1f} s: {record.summary()}")
    for layer in record.promoted:
        print(f"  kept float: {layer.name} (8-bit alone: KL {layer.kl_alone:.1e}; "
              f"+{layer.extra_bytes_per_frame / 1e6:.1f} MB read per frame)", file=sys.stderr)
    return 0


def resolve_model_option(args: argparse.Namespace) -> None:
    """--model on every command: a bundle folder, or the name of an installed model."""
    value = getattr(args, "model", None)
    if value is None:
        return
    from engine.store import ModelStore

    args.model = ModelStore().resolve(value)


def add_parser(sub) -> None:
    from engine.store import DEFAULT_PRECISION

    ms = sub.add_parser("models", help="installed models: list, download (from the hub or a mirror), check, remove")
    msub = ms.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    ml = msub.add_parser("list", help="installed models, one per line (name first)")
    ml.add_argument("--available", action="store_true", help="also list the models that can be downloaded, with their sizes")
    ml.set_defaults(func=cmd_models_list)
    md = msub.add_parser("download", help="download a checkpoint and install it as a model")
    md.add_argument("source", metavar="REPO_ID_OR_CATALOGUE_NAME",
                    help="e.g. Qwen/Qwen3-TTS-12Hz-0.6B-Base, or 0.6B-Base")
    md.add_argument("--name", help="installed name (default: the last part of the repository id)")
    md.add_argument("--precision", default=DEFAULT_PRECISION, help="bundle precision (default: %(default)s)")
    md.add_argument("--endpoint", help="hub or mirror address (default: HF_ENDPOINT, else huggingface.co)")
    md.add_argument("--token", help="token for gated or private repositories (default: HF_TOKEN / stored login)")
    md.add_argument("--keep-checkpoint", action="store_true",
                    help="keep the downloaded checkpoint in MODELS_DIR/checkpoints/ after converting")
    md.set_defaults(func=cmd_models_download)
    mc = msub.add_parser("check", help="measure an 8-bit model made before the 8-bit check against its checkpoint")
    mc.add_argument("name")
    mc.add_argument("--checkpoint", type=Path, metavar="DIR",
                    help="the checkpoint folder it was converted from (default: the one kept by "
                         "'models download --keep-checkpoint')")
    mc.set_defaults(func=cmd_models_check)
    mr = msub.add_parser("remove", help="delete an installed model (or an unfinished download)")
    mr.add_argument("name")
    mr.set_defaults(func=cmd_models_remove)
