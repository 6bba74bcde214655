"""TCLAP's command-line grammar, as Nighthawk's binaries use it (``TCLAP::CmdLine(descr, ' ',
version)``), read without TCLAP's traps.

What TCLAP accepts, and so what a Nighthawk command line can hold:

* ``--name VALUE`` and, for a flag with a one-letter spelling, ``-p VALUE``: the value is
  always the next argument, whatever it looks like (``--request-header -x`` takes ``-x``).
  The delimiter Nighthawk gives TCLAP is a space, so ``--rps=5`` is not ``--rps`` with 5:
  TCLAP matches no flag and takes the whole word for the URI (or rejects it). It is refused
  here by name, with the spelling that works.
* A switch (TCLAP's SwitchArg) takes no value.
* A ValueArg given twice is TCLAP's "Argument already set!"; a MultiArg (``--label``,
  ``--request-header``...) is repeatable and keeps every value in order.
* A ValuesConstraint (``-p http1|http2|http3``) refuses any other value, case included.
* ``--`` (or ``--ignore_rest``): the positional argument can come after it; TCLAP ignores
  the labelled arguments after it, which are refused here (a flag the user meant would
  vanish).
* ``-h``/``--help`` prints the usage and exits 0, ``--version`` the version: when TCLAP
  reaches them, after the arguments before them were read (an error before them wins).
* One positional argument (nighthawk_client's ``<uri format>``); a second one is TCLAP's
  "Couldn't find match for argument".

Where TCLAP would do something surprising it is refused instead (nothing silently wrong): an
unknown ``-x`` or ``--xyz`` is an error naming it (TCLAP takes it for the URI when no URI was
given yet, and Nighthawk then fails on that URI), and ``-phttp2`` is refused (TCLAP matches
the ``h`` of it as a clustered ``-h`` and prints the help with status 0).

Errors are `OptionsError`: one line that names the argument, raised before anything is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .._exceptions import OptionsError

__all__ = ["HELP", "VERSION", "TclapArg", "TclapParse", "parse", "usage"]

#: What `parse` returns for ``-h``/``--help`` and ``--version`` (the caller prints and exits 0).
HELP = "help"
VERSION = "version"



@dataclass(frozen=True)
class TclapArg:
    """One labelled argument: TCLAP's ValueArg, MultiArg or SwitchArg."""

    #: The long name without its dashes (``rps``).
    name: str
    #: The one-letter spelling without its dash (``p``), "" when there is none.
    short: str = ""
    #: The value's type as the usage shows it (``uint32_t``); None for a switch.
    value: str | None = "string"
    #: A MultiArg: repeatable, every value kept.
    multi: bool = False
    #: A ValuesConstraint: the only values accepted.
    allowed: tuple[str, ...] = ()
    required: bool = False
    help: str = ""

    @property
    def spellings(self) -> tuple[str, ...]:
        return ((f"-{self.short}",) if self.short else ()) + (f"--{self.name}",)


@dataclass
class TclapParse:
    """What a command line set: values by long name (a str, a list for a MultiArg, True for
    a switch), the spelling each was given with, and the positional argument."""

    values: dict[str, str | list[str] | bool] = field(default_factory=dict)
    given: dict[str, str] = field(default_factory=dict)
    positional: str | None = None

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def text(self, name: str) -> str | None:
        value = self.values.get(name)
        return value if isinstance(value, str) else None

    def many(self, name: str) -> list[str]:
        value = self.values.get(name)
        return list(value) if isinstance(value, list) else []


# TCLAP's own: -h/--help, --version, --/--ignore_rest.
_BUILTIN = {"-h": HELP, "--help": HELP, "--version": VERSION}
_IGNORE_REST = ("--", "--ignore_rest")


def parse(argv: Sequence[str], args: Sequence[TclapArg], *, positional: str | None,
          program: str) -> TclapParse | str:
    """`argv` (the arguments after the program's name) read as TCLAP reads them for `args`
    and one optional positional argument named `positional` (None: none is taken). Returns
    the `TclapParse`, or `HELP`/`VERSION` when TCLAP would print them and exit 0. Raises
    `OptionsError`."""
    by_spelling = {spelling: arg for arg in args for spelling in arg.spellings}
    out = TclapParse()
    ignoring = False
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if word in _IGNORE_REST:
            ignoring = True
            continue
        arg = by_spelling.get(word)
        if ignoring and word != "-" and word.startswith("-"):
            # TCLAP drops it silently (or, with no URI yet, takes it for the URI): a flag
            # the user meant must not vanish, so it is refused.
            raise OptionsError(f"{word}: after -- (--ignore_rest) TCLAP ignores every flag; "
                             f"put the flags before --")
        if word in _BUILTIN and arg is None:
            return _BUILTIN[word]
        if arg is None:
            if word.startswith("-") and word != "-":
                raise OptionsError(_unknown(word, by_spelling, program))
            if positional is None or out.positional is not None:
                raise OptionsError(
                    f"{word}: {program} takes one {positional} argument and this is another "
                    f"(TCLAP: Couldn't find match for argument)" if positional else
                    f"{word}: {program} takes no positional argument (TCLAP: Couldn't find "
                    f"match for argument)")
            out.positional = word
            continue
        if arg.value is None:
            if arg.name in out.values:
                raise OptionsError(f"{word}: given twice (TCLAP: Argument already set!)")
            out.values[arg.name] = True
            out.given[arg.name] = word
            continue
        if index >= len(argv):
            raise OptionsError(f"{word}: needs a value <{arg.value}> (TCLAP: Missing a value "
                             f"for this argument!)")
        value = argv[index]
        index += 1
        if arg.allowed and value not in arg.allowed:
            raise OptionsError(f"{word}: {value!r} is not one of {'|'.join(arg.allowed)} "
                             f"(TCLAP: Value '{value}' does not meet constraint)")
        if arg.multi:
            previous = out.values.setdefault(arg.name, [])
            assert isinstance(previous, list)
            previous.append(value)
        elif arg.name in out.values:
            raise OptionsError(f"{word}: given twice (TCLAP: Argument already set!)")
        else:
            out.values[arg.name] = value
        out.given[arg.name] = word
    for arg in args:
        if arg.required and arg.name not in out.values:
            raise OptionsError(f"--{arg.name}: required (TCLAP: Required argument missing)")
    return out


def _unknown(word: str, by_spelling: dict[str, TclapArg], program: str) -> str:
    flag, equals, _ = word.partition("=")
    if equals and flag in by_spelling:
        return (f"{word}: {program} reads a flag's value from the next argument "
                f"({flag} VALUE); TCLAP, with Nighthawk's space delimiter, would take "
                f"{word!r} for the URI")
    if not word.startswith("--") and len(word) > 2 and word[:2] in by_spelling:
        return (f"{word}: {program} reads a flag's value from the next argument "
                f"({word[:2]} {word[2:]}); TCLAP would match a clustered switch in it")
    return f"{word}: not a {program} flag (see {program} --help)"


def usage(program: str, args: Sequence[TclapArg], positional: str | None,
          description: str) -> str:
    """A usage text in TCLAP's layout (``USAGE:``, one bracketed entry a flag, ``Where:``,
    the help of each): what ``--help`` prints."""
    entries = []
    for arg in args:
        spelling = arg.spellings[0]
        value = f" <{'|'.join(arg.allowed) or arg.value}>" if arg.value is not None else ""
        entry = f"{spelling}{value}"
        entries.append((entry if arg.required else f"[{entry}]") + (" ..." if arg.multi else ""))
    entries += ["[--]", "[--version]", "[-h]"]
    if positional:
        entries.append(f"<{positional}>")
    import textwrap

    synopsis = textwrap.fill(f"{program}  {' '.join(entries)}", width=76,
                             initial_indent="   ", subsequent_indent="      ",
                             break_on_hyphens=False, break_long_words=False)
    lines = ["", "USAGE: ", "", synopsis, "", "", "Where: ", ""]
    for arg in args:
        value = f" <{'|'.join(arg.allowed) or arg.value}>" if arg.value is not None else ""
        names = ",  ".join(f"{s}{value}" for s in arg.spellings)
        extra = "  (accepted multiple times)" if arg.multi else ""
        extra += "  (required)" if arg.required else ""
        lines += [f"   {names}{extra}", f"     {arg.help}", ""]
    lines += ["   --,  --ignore_rest", "     Ignores the rest of the labeled arguments "
              "following this flag.", "", "   --version", "     Displays version information "
              "and exits.", "", "   -h,  --help", "     Displays usage information and exits.",
              ""]
    if positional:
        lines += [f"   <{positional}>", "     The target URI.", ""]
    lines += ["", f"   {description}", ""]
    return "\n".join(lines) + "\n"
