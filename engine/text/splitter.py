"""Long text -> chunks of whole sentences, each short enough for one synthesis.

Sentence boundaries come from sentencex (Wikimedia's rule-based segmenter: abbreviations, decimals, versions,
ellipses and quotes for ~300 languages, including all ten the model speaks). A few rules for speech sit on top:
  - a blank line always ends a chunk (paragraphs get a longer pause);
  - `;` and `；` end a sentence, and so does an ellipsis followed by a capital letter;
  - no end before a lower-case letter, after a lone initial ("M. Dupont"), after a list number ("1."), or
    after a closing quote that the sentence continues without a space (「本当？」と聞いた);
  - a sentence longer than the target is cut at clause punctuation, then at spaces, then (CJK without
    punctuation only) between two ideographs; a token with no space in it (a URL) stays whole.
Single line breaks are spaces (hard-wrapped text). Nothing is lost, duplicated or reordered: joining the chunks
gives the text back up to whitespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sentencex

from ..errors import TextError

DEFAULT_MAX_CHARS = 200  # about 15 s of English or 40 s of Chinese: short enough that the model does not drift
MIN_MAX_CHARS = 10

# The model's language names -> sentencex codes. "auto" picks by script (see _detect).
LANGUAGE_CODES = {
    "english": "en", "chinese": "zh", "japanese": "ja", "korean": "ko", "german": "de", "french": "fr",
    "russian": "ru", "portuguese": "pt", "spanish": "es", "italian": "it",
}

# The commonest short words of each Latin-script language: enough to pick its abbreviation rules for "auto".
_FUNCTION_WORDS = {
    "en": {"the", "and", "of", "to", "is", "was", "that", "it", "he", "she", "with", "for"},
    "de": {"der", "die", "das", "und", "ist", "nicht", "ein", "eine", "ich", "mit", "den", "zu"},
    "fr": {"le", "les", "et", "est", "un", "une", "des", "du", "je", "il", "pas", "au"},
    "es": {"el", "los", "las", "y", "es", "una", "por", "con", "del", "se", "lo", "muy"},
    "it": {"il", "e", "è", "di", "che", "non", "per", "gli", "sono", "della", "un", "una"},
    "pt": {"o", "os", "é", "um", "uma", "não", "do", "da", "em", "que", "com", "muito"},
}

_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
_CLOSING_QUOTES = "\"'”’»」』）)]】〉》"
_EXTRA_ENDS = re.compile(
    r";\s+|；\s*"  # semicolons end a sentence for speech
    r"|(?:…|\.\.\.)\s+(?=[\"“«„(]?[A-ZÀ-ÞА-ЯЁ])"  # an ellipsis before a capital letter
)
_LONE_INITIAL = re.compile(r"(?:^|[\s(\"“«])[A-Za-zÀ-ÖØ-öø-ÿА-яЁё]\.\s*$")
# a list number right after the start or a sentence end: "1. First item", "Come stai? 2. Secondo"
_ENUMERATOR = re.compile(r"(?:^|[.!?:;。！？]\s+)\s*(?:\d{1,3}|[ivxlcdm]{1,5}|[IVXLCDM]{1,5})[.)]\s*$")
_QUOTES = "\"'“”‘’«»„"
_CLAUSE_CUT = re.compile(r"[,:;—–](?=\s)|[、，：；]")


@dataclass(frozen=True)
class TextChunk:
    """One piece of a long text: whole sentences, whitespace collapsed to single spaces."""

    text: str
    paragraph: int  # index of the paragraph (text between blank lines) it comes from
    ends_paragraph: bool  # the next chunk starts a new paragraph (a longer pause)


def split_text(text: str, max_chars: int = DEFAULT_MAX_CHARS, language: str = "auto") -> list[TextChunk]:
    """Chunks of at most max_chars characters (a single longer token excepted); [] for blank text."""
    if not isinstance(text, str):
        raise TextError("The text must be a string.")
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < MIN_MAX_CHARS:
        raise TextError(f"The chunk length must be a whole number of at least {MIN_MAX_CHARS} characters, "
                        f"not {max_chars!r}.")
    rules = segmentation_rules(language, text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    chunks: list[TextChunk] = []
    paragraphs = [p for p in _PARAGRAPH_BREAK.split(text) if p.strip()]
    for index, paragraph in enumerate(paragraphs):
        pieces: list[str] = []
        for sentence in sentences(paragraph, rules):
            pieces.extend(_cut_long(sentence, max_chars))
        packed = _pack(pieces, max_chars)
        chunks.extend(TextChunk(t, index, j == len(packed) - 1) for j, t in enumerate(packed))
    return chunks


def segmentation_rules(language: str, text: str = "") -> str:
    """The sentencex language for a model language name (or an ISO code); "auto" guesses from the text."""
    lang = (language or "auto").strip().lower() if isinstance(language, str) else None
    if lang == "auto":
        return _detect(text)
    if lang in LANGUAGE_CODES:
        return LANGUAGE_CODES[lang]
    if lang in LANGUAGE_CODES.values():
        return lang
    names = ", ".join(["auto", *LANGUAGE_CODES])
    raise TextError(f"The splitter does not know the language {language!r}; choose one of {names}.")


def sentences(paragraph: str, rules: str) -> list[str]:
    """The paragraph's sentences, whitespace collapsed. The library only proposes cut positions, so the
    pieces always cover the paragraph exactly."""
    cuts = {int(b["end_index"]) for b in sentencex.get_sentence_boundaries(rules, paragraph)}
    cuts |= {m.end() for m in _EXTRA_ENDS.finditer(paragraph)}
    kept: list[int] = []
    start = 0
    for cut in sorted(c for c in cuts if 0 < c < len(paragraph)):
        if _is_false_end(paragraph, start, cut):
            continue
        kept.append(cut)
        start = cut
    bounds = [0, *kept, len(paragraph)]
    out = [" ".join(paragraph[a:b].split()) for a, b in zip(bounds, bounds[1:], strict=False)]
    return [s for s in out if s]


def _is_false_end(text: str, start: int, cut: int) -> bool:
    before, after = text[start:cut], text[cut:].lstrip()
    if not after or not before.strip():
        return True
    if before.rstrip()[-1] in ";；":
        return False  # a clause of its own for speech, whatever follows
    if after[0].islower():
        return True  # a sentence does not start in lower case: "e.g. this", "Т. е. это"
    if before[-1] in _CLOSING_QUOTES and not text[cut].isspace():
        return True  # the sentence goes on right after the quote: 「本当？」と聞いた, "안녕!"이라고
    if _LONE_INITIAL.search(before) or _ENUMERATOR.search(before):
        return True  # "M. Dupont", "J. Smith", "1. First item"
    return False


def _cut_long(sentence: str, max_chars: int) -> list[str]:
    """A sentence within the limit, or pieces of it cut at clause punctuation, spaces, between ideographs."""
    out = []
    while len(sentence) > max_chars:
        cut = _best_cut(sentence, max_chars)
        if cut is None:  # one token longer than the limit (a URL): keep it whole
            space = re.search(r"\s", sentence)
            cut = space.start() if space else len(sentence)
        out.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    if sentence:
        out.append(sentence)
    return out


def _best_cut(s: str, limit: int) -> int | None:
    clause = [m.end() for m in _CLAUSE_CUT.finditer(s, 0, limit + 1) if m.end() <= limit]
    # a clause cut that would leave a tiny first piece reads worse than a cut at a space
    if clause and clause[-1] >= limit // 3:
        return clause[-1]
    spaces = [m.start() for m in re.finditer(r"\s", s[: limit + 1]) if m.start() > 0]
    if spaces:
        return spaces[-1]
    if clause:
        return clause[-1]
    ideograph = [i for i in range(1, min(limit, len(s) - 1) + 1) if _is_ideograph(s[i - 1]) and _is_ideograph(s[i])]
    return ideograph[-1] if ideograph else None


def _pack(pieces: list[str], max_chars: int) -> list[str]:
    """Greedy: as many whole pieces per chunk as fit."""
    packed: list[str] = []
    for piece in pieces:
        if packed:
            joined = _join(packed[-1], piece)
            if len(joined) <= max_chars:
                packed[-1] = joined
                continue
        packed.append(piece)
    return packed


def _join(a: str, b: str) -> str:
    """Next to CJK no space is needed; everything else gets one (quotes take the side of what they enclose)."""
    end, start = a.rstrip(_QUOTES) or a, b.lstrip(_QUOTES) or b
    return a + b if _is_cjk(end[-1]) or _is_cjk(start[0]) else f"{a} {b}"


def _is_ideograph(ch: str) -> bool:
    o = ord(ch)
    return 0x3040 <= o <= 0x30FF or 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF


def _is_cjk(ch: str) -> bool:
    """Ideographs, kana and full-width punctuation (Korean uses spaces between words, so hangul is not here)."""
    o = ord(ch)
    return _is_ideograph(ch) or 0x3000 <= o <= 0x303F or 0xFF00 <= o <= 0xFFEF


def _detect(text: str) -> str:
    """The script decides: kana -> Japanese, hangul -> Korean, ideographs -> Chinese, Cyrillic -> Russian."""
    kana = hangul = han = 0
    for ch in text[:5000]:
        o = ord(ch)
        if 0x3040 <= o <= 0x30FF:
            kana += 1
        elif 0xAC00 <= o <= 0xD7AF:
            hangul += 1
        elif 0x3400 <= o <= 0x9FFF:
            han += 1
    if kana:
        return "ja"
    if hangul > han:
        return "ko"
    if han:
        return "zh"
    cyrillic = sum(1 for ch in text[:5000] if "\u0400" <= ch <= "\u04ff")
    latin = sum(1 for ch in text[:5000] if ch.isascii() and ch.isalpha())
    if cyrillic > latin:
        return "ru"
    words = re.findall(r"[^\W\d_]+", text[:5000].lower())
    scores = {code: sum(w in common for w in words) for code, common in _FUNCTION_WORDS.items()}
    best = max(scores, key=lambda code: scores[code])
    return best if scores[best] > scores["en"] else "en"  # English rules when nothing points elsewhere
