"""GPT-2's byte-level alphabet: the reversible map from each byte to a printable character, in which byte-level BPE
vocabularies (Qwen2's, Whisper's) spell their tokens. Imports nothing."""

from __future__ import annotations


def bytes_to_unicode() -> dict[int, str]:
    """Byte -> printable character; the byte order is the first 256 ids of a Qwen2 vocabulary."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))
