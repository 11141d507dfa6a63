"""Text from a guest or a kernel console made safe to print: `printable` (escape
sequences removed, control bytes shown), `shown` (also cut, the length said), `Stripper`
for a stream, `xml_text` for junit.xml and the report.

A crash title, a test message or a console tail is whatever the guest wrote:
it may carry terminal control sequences (OSC 0 sets the window title, CSI 2J
clears the screen, OSC 52 writes the clipboard) or stray control bytes.
`printable` is the one function every printer uses on such text, whether the
output is a terminal or a pipe (a CI log is viewed in a terminal later):

* escape sequences are removed whole: CSI (ESC [ ... final byte, or the
  8-bit CSI 0x9B), the string sequences OSC, DCS, SOS, PM and APC up to their
  terminator (BEL or ST), and the other two- or three-byte ESC sequences;
* every other control character except newline and tab is replaced by a
  visible placeholder: C0 bytes and DEL by their Unicode Control Picture
  (ESC becomes "␛", BEL "␇", a lone carriage return "␍", DEL "␡"), C1
  characters (U+0080..U+009F, no picture exists) by the text "\\x9b" etc.;
  a CR LF line ending is kept as a plain newline;
* invisible format characters are shown by their code point, "<U+202E>":
  the bidirectional controls (U+061C, U+200E, U+200F, U+202A..U+202E,
  U+2066..U+2069), which reorder what a terminal shows ("test_ok<U+202E>"
  could read as a different name), the zero-width and invisible ones
  (U+200B, U+2060..U+2064, U+206A..U+206F, U+FEFF, U+FFF9..U+FFFB, the tag
  characters U+E0000..U+E007F), and what no UTF-8 output can carry or
  XML allows (U+FFFE, U+FFFF, a lone surrogate); U+200C and U+200D stay
  (scripts and emoji need them);
* the result is passed through rich's markup escape, so "[bold]" in a guest
  message is printed as written.

`clip` cuts a value (a test name, a patch subject, a crash title) to
inputs.QUOTE characters with its length said, `shown` is clip then
printable: a summary line or a message holds at most that much of one
value. `xml_text` is the one function for text going into XML or HTML
(junit.xml, report.html): escape sequences removed, every character XML 1.0
forbids (C0 controls but tab, newline and CR; U+FFFE, U+FFFF; a lone
surrogate) replaced by U+FFFD.

`Stripper` does the same to a byte stream read in pieces (`harness console`
following a console file): a UTF-8 character or an escape sequence split
between two reads is decoded, or removed, whole.

results.json keeps the raw text: only what is printed is cleaned."""
from __future__ import annotations

import codecs
import re

from rich.markup import escape

from ..inputs import QUOTE

# string sequences: OSC ]  DCS P  SOS X  PM ^  APC _ (7-bit), or their 8-bit
# introducers; the body ends at BEL or ST (ESC \ or 0x9C). An unterminated
# one is left to the control-character pass below (its ESC becomes visible).
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
# ESC ( B, ESC 7, ESC c, ...: not an introducer of the two kinds above, so an
# unterminated OSC or CSI keeps a visible "␛" rather than vanishing silently
_OTHER_ESC = r"\x1b[ -/]*[0-OQ-WYZ\\`a-~]"
_SEQUENCE = re.compile(f"{_STRING}|{_CSI}|{_OTHER_ESC}")
# the start of a sequence the text ends in the middle of (more may complete it)
_PARTIAL = re.compile(r"(?:(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*\x1b?"
                      r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*|\x1b[ -/]*)\Z")
_INTRODUCER = re.compile(r"[\x1b\x90\x98\x9b\x9d\x9e\x9f]")
# invisible format characters worth flagging (see the module's doc)
FORMAT_CHARACTERS = ("\u061c\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
                     "\ufeff\ufff9-\ufffb\ufffe\uffff\ud800-\udfff\U000e0000-\U000e007f")
_SHOWN = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{FORMAT_CHARACTERS}]")
# what XML 1.0 cannot carry at all (its Char production)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _placeholder(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if code <= 0x9F:
        return f"\\x{code:02x}"
    return f"<U+{code:04X}>"


def strip_controls(text: str) -> str:
    """`text` without escape sequences or raw control characters, invisible
    format characters shown as "<U+XXXX>" (no markup escaping: for output
    that is not rich markup)."""
    text = _SEQUENCE.sub("", str(text)).replace("\r\n", "\n")
    return _SHOWN.sub(_placeholder, text)


def clip(text: str, limit: int = QUOTE) -> str:
    """`text` cut to `limit` characters, the length said: a value in a
    message or a summary line (a 2 MiB patch subject is no line)."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def shown(text: str, limit: int = QUOTE) -> str:
    """One value for rich's console.print: clip, then printable."""
    return printable(clip(text, limit))


def xml_text(text: str) -> str:
    """`text` that XML 1.0 (junit.xml, report.html: a polyglot page) can
    carry: escape sequences removed, a forbidden character replaced by
    U+FFFD. Markup characters (<, &) are left to the writer's escaping."""
    return _NOT_XML.sub("\ufffd", _SEQUENCE.sub("", str(text)))


def printable(text: str) -> str:
    """`text` ready for rich's console.print: no escape sequence, no control
    character but newline and tab, markup escaped."""
    return escape(strip_controls(text))


class Stripper:
    """strip_controls for a stream of bytes: `feed` returns what can be
    printed of the bytes so far, holding back an incomplete UTF-8 character,
    an escape sequence not yet ended (at most `hold` characters of it: a
    longer one is printed as text, its ESC made visible) and a trailing CR
    (it may be a CR LF); `flush` prints what is held back of a sequence that
    stays unfinished (a reader that saw no new bytes for a while), `end` the
    rest at the end of the stream."""

    def __init__(self, hold: int = 512):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._carry = ""
        self._hold = hold

    @property
    def holding(self) -> bool:
        return bool(self._carry)

    def feed(self, data: bytes) -> str:
        text = self._carry + self._decoder.decode(data)
        cut = _cut(text)
        if len(text) - cut > self._hold:
            cut = len(text)
        self._carry = text[cut:]
        return strip_controls(text[:cut])

    def flush(self) -> str:
        text, self._carry = self._carry, ""
        return strip_controls(text)

    def end(self) -> str:
        return self.flush() + strip_controls(self._decoder.decode(b"", final=True))


def _cut(text: str) -> int:
    """Where the part of `text` that more text cannot change ends: before an
    escape sequence that has begun and not ended, or a final CR."""
    pos = 0
    while True:
        found = _INTRODUCER.search(text, pos)
        if found is None:
            break
        start = found.start()
        whole = _SEQUENCE.match(text, start)
        if whole:
            pos = whole.end()
        elif _PARTIAL.match(text, start):
            return start
        else:
            pos = start + 1
    return len(text) - 1 if text.endswith("\r") else len(text)
