"""Names people give things (skills, models, judges, raters, projects, datasets): one rule
for every place a name enters, pure Python, no Django.

- `name_clean` NFKC-normalises a name, trims it, and refuses characters that make two names
  look the same or one name look like something else: controls, bidirectional overrides and
  marks, zero-width and other invisible characters, private-use and unpaired surrogate code
  points, line and paragraph separators, and white space other than the ASCII space (a
  no-break space too: it is refused as given, before normalising).
- `name_skeleton` is what two names are compared by: NFKC, case-folded, the usual Cyrillic
  and Greek look-alikes of Latin letters mapped to them, and spaces, `_` and `-` dropped. It
  follows the idea of the skeleton of Unicode TR39 (confusable detection) with a small
  table of our own: a subset of TR39's data, the letters that actually pass for Latin ones
  in names, not the whole confusables file.
- `NameScope` holds the names of one kind in one scope (a project's skills, a dataset's
  models) and refuses a new name whose skeleton is an existing name's, while the existing
  name itself (spelled exactly) is fine: `Fаctuality` with a Cyrillic `а` "looks like the
  existing skill 'Factuality'".
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

#: Characters no name may hold, with the word a message uses for them. Most are in the
#: categories below anyway; these are named for clearer messages, and the fillers and blank
#: are visible letters or symbols to Unicode but draw nothing.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_INVISIBLE = frozenset(
    "\u00ad\u034f\u115f\u1160\u180e\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064"
    "\u3164\ufeff\uffa0\u2800"
)
#: Unicode categories refused: controls, formats, private use, surrogates, line and
#: paragraph separators, unassigned code points.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp", "Cn"})

#: Cyrillic and Greek capitals that pass for Latin ones (mapped before case folding, since
#: folding Greek Μ gives μ, which looks like u, not m).
_LOOKALIKE_CAPITALS = str.maketrans(
    {
        # Cyrillic
        "А": "A",
        "В": "B",
        "Е": "E",
        "К": "K",
        "М": "M",
        "Н": "H",
        "О": "O",
        "Р": "P",
        "С": "C",
        "Т": "T",
        "Х": "X",
        "У": "Y",
        "Ѕ": "S",
        "І": "I",
        "Ј": "J",
        "Ԛ": "Q",
        "Ԝ": "W",
        # Greek
        "Α": "A",
        "Β": "B",
        "Ε": "E",
        "Ζ": "Z",
        "Η": "H",
        "Ι": "I",
        "Κ": "K",
        "Μ": "M",
        "Ν": "N",
        "Ο": "O",
        "Ρ": "P",
        "Τ": "T",
        "Υ": "Y",
        "Χ": "X",
    }
)
#: Cyrillic and Greek small letters (and a few Latin ones) that pass for Latin ones.
_LOOKALIKES = str.maketrans(
    {
        # Cyrillic
        "а": "a",
        "в": "b",
        "е": "e",
        "ё": "e",
        "һ": "h",
        "і": "i",
        "ї": "i",
        "ј": "j",
        "к": "k",
        "ӏ": "l",
        "м": "m",
        "н": "h",
        "о": "o",
        "р": "p",
        "ԛ": "q",
        "с": "c",
        "ѕ": "s",
        "т": "t",
        "у": "y",
        "ү": "y",
        "ԝ": "w",
        "х": "x",
        "ԁ": "d",
        "ɡ": "g",
        # Greek
        "α": "a",
        "β": "b",
        "ε": "e",
        "η": "n",
        "ι": "i",
        "κ": "k",
        "μ": "u",
        "ν": "v",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "υ": "u",
        "χ": "x",
        "γ": "y",
        "ζ": "z",
        "ω": "w",
        # Latin letters that read as others
        "ı": "i",
        "ȷ": "j",
        "ʟ": "l",
    }
)
_SEPARATORS = str.maketrans("", "", " _-")


class NameRefused(ValueError):
    """A name refused by name_clean or NameScope; the message says why, for a person."""


def name_problem(name: str) -> str | None:
    """What makes `name` unusable as a name (the first such character, with its code point
    and how many characters come before it), or None."""
    for position, char in enumerate(name):
        code = f"U+{ord(char):04X}"
        if char in _BIDI:
            what = "a bidirectional control character"
        elif char in _INVISIBLE:
            what = "an invisible character"
        elif char.isspace() and char != " ":
            what = "white space other than a space"
        elif unicodedata.category(char) in _REFUSED_CATEGORIES:
            what = "a control or format character"
        else:
            continue
        after = f" (after {name[:position]!r})" if position else ""
        return f"contains {what} {code} at position {position}{after}"
    return None


def name_clean(value: str, *, what: str = "the name") -> str:
    """`value` NFKC-normalised and trimmed; NameRefused when it is empty or holds a
    character name_problem refuses (checked as given, so the position is the one the
    person typed, and again after normalising)."""
    problem = name_problem(value)
    if problem is None:
        value = unicodedata.normalize("NFKC", value).strip()
        problem = name_problem(value)
    if problem is not None:
        raise NameRefused(f"{what} {problem}")
    if not value:
        raise NameRefused(f"{what} is empty")
    return value


def name_skeleton(name: str) -> str:
    """What two names are compared by (see the module docstring)."""
    folded = unicodedata.normalize("NFKC", name).translate(_LOOKALIKE_CAPITALS).casefold()
    return unicodedata.normalize("NFKC", folded.translate(_LOOKALIKES)).translate(_SEPARATORS)


class NameScope:
    """The names of one kind (`kind`: "skill", "model") in one scope. `check` answers why a
    name cannot join the scope, or None; `add` makes it part of the scope."""

    def __init__(self, kind: str, names: Iterable[str] = (), *, exact=None) -> None:
        self.kind = kind
        self.by_skeleton: dict[str, str] = {}
        # how a name counts as the same name as an existing one (exact spelling, unless the
        # caller matches more loosely, like skill names ignoring case and separators)
        self.exact = exact or (lambda name: name)
        self.known: set[str] = set()
        for name in names:
            self.add(name)

    def add(self, name: str) -> None:
        self.by_skeleton.setdefault(name_skeleton(name), name)
        self.known.add(self.exact(name))

    def check(self, name: str) -> str | None:
        if self.exact(name) in self.known:
            return None
        existing = self.by_skeleton.get(name_skeleton(name))
        if existing is None:
            return None
        return f"{name!r} looks like the existing {self.kind} {existing!r}"

    def admit(self, name: str) -> str | None:
        """check, and add when it passes."""
        why = self.check(name)
        if why is None:
            self.add(name)
        return why
