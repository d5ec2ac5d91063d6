"""Text shown to people has its invisible and reordering characters as
escapes (:func:`swh_like_scheduler.domain.text.visible`), and ordinary text of
every script as it is."""

from __future__ import annotations

import unicodedata

import pytest

from swh_like_scheduler.domain.text import visible

#: the attacker's example: shown raw, it reads "exe.png"
SPOOF = "\u202egnp.exe"


def test_a_right_to_left_override_is_shown_as_an_escape() -> None:
    assert visible(SPOOF) == "\\u202egnp.exe"
    assert visible(f"report-{SPOOF}-final") == "report-\\u202egnp.exe-final"


@pytest.mark.parametrize(
    "char",
    [
        # embeddings and overrides
        *"\u202a\u202b\u202c\u202d\u202e",
        # isolates
        *"\u2066\u2067\u2068\u2069",
        # marks: left-to-right, right-to-left, Arabic letter mark
        *"\u200e\u200f\u061c",
        # zero widths, word joiner, byte order mark, soft hyphen
        *"\u200b\u200c\u200d\u2060\ufeff\u00ad",
        # line and paragraph separators
        *"\u2028\u2029",
        # a tag character (hides ASCII text), a Hangul filler (a blank letter)
        "\U000e0041",
        "\u3164",
    ],
)
def test_each_hidden_character_is_escaped(char: str) -> None:
    shown = visible(f"a{char}b")
    assert char not in shown
    assert shown.startswith("a\\") and shown.endswith("b")
    # the escape reads back as the character (Python's and JSON's form)
    assert shown[1:-1].encode("ascii").decode("unicode_escape") == char


@pytest.mark.parametrize("code", [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)])
def test_every_c0_and_c1_control_is_escaped(code: int) -> None:
    char = chr(code)
    shown = visible(f"x{char}y")
    assert char not in shown and shown.startswith("x\\") and shown.endswith("y")
    # the form repr uses: a named escape or \xNN
    assert shown == "x" + repr(char)[1:-1] + "y"


def test_an_escape_sequence_of_a_terminal_is_shown_not_run() -> None:
    assert visible("\x1b[2J\x1b[31mok") == "\\x1b[2J\\x1b[31mok"


def test_every_control_and_format_character_is_escaped() -> None:
    """The whole categories, whatever the Unicode version brings."""
    for code in range(0x110000):
        char = chr(code)
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            assert char not in visible(f"a{char}a"), f"U+{code:04X}"


@pytest.mark.parametrize(
    "text",
    [
        "plain ascii: load-git https://example.org/a/b?c=1#d",
        "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",  # Arabic
        "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",  # Hebrew
        "\u05d0\u05d1\u05d2 (abc) 123 \u0627\u0628\u062a",  # mixed directions
        "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m e\u0301",  # accents, a combining mark
        "\u4e2d\u6587 \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4",  # Chinese, Japanese, Korean
        "\u0420\u0443\u0441\u0441\u043a\u0438\u0439",  # Russian
        "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",  # Greek
        "C:\\Users\\x\\file.txt \\u202e",  # backslashes stay, even spelling an escape
        "no\u00a0break \u3000wide",  # spaces other than the space
        "\u2764\ufe0f \U0001f600 \U0001f44d\U0001f3fd",  # emoji, a selector, a skin tone
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a family: joiners between emoji
        "\U0001f3f3\ufe0f\u200d\U0001f308",  # a flag: a joiner after the selector
        "\U0001f469\U0001f3fd\u200d\U0001f4bb",  # a profession with a skin tone
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian with its non-joiner
        "\u0915\u094d\u200d\u0937",  # Devanagari with a joiner
        "",
    ],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert visible(text) == text
    assert visible(text, lines=True) == text


def test_joiners_that_draw_nothing_are_escaped() -> None:
    # between Latin letters a (non-)joiner makes two names look alike
    assert visible("pay\u200cpal") == "pay\\u200cpal"
    assert visible("a\u200db") == "a\\u200db"
    # at either end, or between an emoji and a letter
    assert visible("\u200d\U0001f600") == "\\u200d\U0001f600"
    assert visible("\U0001f600\u200d") == "\U0001f600\\u200d"
    assert visible("\U0001f600\u200da") == "\U0001f600\\u200da"
    # the non-joiner has no place in an emoji sequence
    assert visible("\U0001f468\u200c\U0001f469") == "\U0001f468\\u200c\U0001f469"
    # a joiner between Arabic and Latin letters
    assert visible("\u0628\u200cb") == "\u0628\\u200cb"


def test_the_escapes_are_pythons() -> None:
    assert visible("\n\t\r\x00\x7f\x85") == "\\n\\t\\r\\x00\\x7f\\x85"
    assert visible("\u2028\ufeff") == "\\u2028\\ufeff"
    assert visible("\U000e007f") == "\\U000e007f"


def test_a_lone_surrogate_is_escaped() -> None:
    assert visible("a\ud800b") == "a\\ud800b"


def test_a_block_of_lines_keeps_its_lines_and_tabs() -> None:
    error = "Traceback (most recent call last):\n\tFile x\r\nValueError: \u202eboom"
    assert visible(error, lines=True) == (
        "Traceback (most recent call last):\n\tFile x\r\nValueError: \\u202eboom"
    )
    # a lone carriage return would let a terminal write over the line
    assert visible("done\rFAILED", lines=True) == "done\\rFAILED"
    assert visible("a\u2028b\x0bc", lines=True) == "a\\u2028b\\x0bc"
    # a single line escapes its line breaks: no line can be forged
    assert visible("key\n  Status: OK") == "key\\n  Status: OK"


def test_the_usual_text_is_returned_as_it_is() -> None:
    text = "sleep-" * 100
    assert visible(text) is text
