"""Words for people: counts with the right noun form, error headlines, and
text shown with its invisible characters made visible."""

from __future__ import annotations

import unicodedata


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 task``, ``0 tasks``, ``3 tasks`` (``many``: an irregular plural)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


#: what a cut text ends with
ELLIPSIS = "\u2026"


def celery_id(backend_id: str, width: int = 8) -> str:
    """The start of a Celery task id (``dbf6279e…``), as people quote it."""
    return backend_id if len(backend_id) <= width else backend_id[:width] + ELLIPSIS


def run_name(number: int | None, backend_id: str) -> str:
    """``run 216 (celery id dbf6279e…)``: a run by its number, the start of
    its Celery id beside it (the whole id when it has no number yet)."""
    if number is None:
        return f"run (celery id {backend_id})"
    return f"run {number} (celery id {celery_id(backend_id)})"


def headline(text: str | None, width: int | None = None) -> str:
    """The line of an error text that says what happened: its first
    non-blank line, or the last one of a Python traceback (the exception);
    cut to ``width`` characters (ending with an ellipsis) when longer, and
    ending with an ellipsis when more lines follow."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback (most recent call last)"):
        line, more = lines[-1], True
    else:
        line, more = lines[0], len(lines) > 1
    suffix = f" {ELLIPSIS}" if more else ""
    if width is not None and len(line) + len(suffix) > width:
        return line[: max(width - 1, 0)] + ELLIPSIS
    return line + suffix


#: the general categories of characters that draw nothing or move other
#: text: controls (Cc: C0, DEL, C1), formats (Cf: bidi embeddings, overrides,
#: isolates and marks, zero widths, word joiner, BOM, soft hyphen, tags),
#: line and paragraph separators (Zl, Zp) and lone surrogates (Cs)
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
#: letters that draw nothing (the Hangul fillers): a name of them looks empty
BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
#: the escapes with a name (the rest are hexadecimal, as Python writes them)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: the zero-width non-joiner and joiner
_ZWNJ, _ZWJ = "\u200c", "\u200d"
#: scripts whose letters join or form conjuncts, where a zero-width
#: (non-)joiner visibly changes the shapes around it: Arabic, Syriac,
#: Thaana, NKo and their supplements; the Indic scripts from Devanagari to
#: Sinhala; Mongolian; the Arabic presentation forms
_JOINING = (
    (0x0600, 0x08FF),
    (0x0900, 0x0DFF),
    (0x1800, 0x18AF),
    (0xFB50, 0xFDFF),
    (0xFE70, 0xFEFE),
)
#: the skin tone modifiers, which may come between an emoji and a joiner
_SKIN_TONES = (0x1F3FB, 0x1F3FF)


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with each character that draws nothing or reorders the text
    around it shown as an escape: ``gnp.exe`` behind a right-to-left
    override (U+202E) shows as ``\\u202egnp.exe``, not as ``exe.png``.

    The escapes are Python's (``\\x1b``, ``\\u202e``, ``\\U000e0041``,
    ``\\n``, ``\\t``, ``\\r``): the form the command line already shows
    arguments in (their ``repr``) and that JSON and shells read back, so one
    text looks the same in a key and in an argument, and can be pasted. A
    literal backslash is left as it is (error texts and paths are full of
    them): a text may spell an escape itself, but no hidden character can
    pass for a visible one.

    Escaped: the categories of :data:`HIDDEN_CATEGORIES` and the blank
    letters of :data:`BLANK_LETTERS`. Everything else is unchanged: letters
    of every script (Arabic and Hebrew are drawn right to left by the
    reader's own bidi rules, which no hidden character then overrides),
    marks, variation selectors, spaces, emoji. Two joiners are kept where
    they draw something: a zero-width joiner between two emoji (a family,
    a profession: one pictogram, and nothing Latin around it can change
    look), and a zero-width joiner or non-joiner between two letters of a
    joining script (:data:`_JOINING`: Persian needs the non-joiner, Indic
    scripts the joiner; there they change the shapes visibly). Anywhere
    else they are invisible and escaped. The tag characters (U+E0000
    block) are always escaped: they hide text, even inside a flag.

    ``lines``: the text is a block of lines shown as such (an error text in
    a ``<pre>``): line feeds, tabs and a carriage return before a line feed
    are kept; a lone carriage return (which lets a terminal overwrite the
    line) is still escaped."""
    if _plain(_unbroken(text) if lines else text):
        return text  # the usual case, decided in C
    out: list[str] = []
    for start in range(0, len(text), _CHUNK):
        chunk = text[start : start + _CHUNK]
        if _plain(_unbroken(chunk) if lines else chunk):
            out.append(chunk)
        else:
            out.extend(
                char if _kept(text, index, lines) else _escape(char)
                for index, char in enumerate(chunk, start)
            )
    return "".join(out)


#: characters looked at in one piece: most pieces of a long text are plain
_CHUNK = 64


def _plain(text: str) -> bool:
    """Nothing to escape in ``text``, decided in C. ``False`` may still
    mean nothing to escape (a kept joiner, a no-break space): the slow way,
    character by character, decides those."""
    return text.isprintable() and not any(blank in text for blank in BLANK_LETTERS)


def _unbroken(text: str) -> str:
    """``text`` less what a block keeps: line feeds, tabs, CR LF pairs."""
    return text.replace("\r\n", "").replace("\n", "").replace("\t", "")


def _kept(text: str, index: int, lines: bool) -> bool:
    """Whether the character at ``index`` is shown as it is."""
    char = text[index]
    if not _hidden(char):
        return True  # printable; or another space, private use, not yet assigned
    if lines and (char in "\n\t" or (char == "\r" and text[index + 1 : index + 2] == "\n")):
        return True
    return char in (_ZWNJ, _ZWJ) and _joins(text, index)


def _hidden(char: str) -> bool:
    if char in BLANK_LETTERS:
        return True
    return not char.isprintable() and unicodedata.category(char) in HIDDEN_CATEGORIES


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _joins(text: str, index: int) -> bool:
    """Whether the (non-)joiner at ``index`` draws something (see :func:`visible`)."""
    before = text[index - 1] if index > 0 else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    if not before or not after:
        return False
    if text[index] == _ZWJ and _emoji_end(before) and unicodedata.category(after) == "So":
        return True
    return _joining_letter(before) and _joining_letter(after)


def _emoji_end(char: str) -> bool:
    """A character an emoji may end with: a symbol, the emoji presentation
    selector (U+FE0F), a skin tone."""
    code = ord(char)
    return (
        unicodedata.category(char) == "So"
        or char == "\ufe0f"
        or _SKIN_TONES[0] <= code <= _SKIN_TONES[1]
    )


def _joining_letter(char: str) -> bool:
    code = ord(char)
    return unicodedata.category(char)[0] in "LM" and any(
        low <= code <= high for low, high in _JOINING
    )


__all__ = ["ELLIPSIS", "headline", "plural", "visible"]
