"""`ForeignFlag`: one flag of Fortio or Nighthawk and what nhbench does with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import OptionsError

__all__ = ["ForeignFlag"]


@dataclass(frozen=True)
class ForeignFlag:
    """One flag as the tool it comes from spells and means it, and its fate here.

    Exactly one of `nhbench` (what the flag becomes: nhbench's spelling and any difference,
    for the migration table) and `refused` (why it is refused: the one-line message after
    the flag's name) is set. `apply` is the front-end's function that carries a mapped flag
    into the run being built; its signature is the front-end's own.
    """

    #: Every spelling the tool accepts, with its dashes: ``("-qps",)``, ``("-p", "--protocol")``.
    names: tuple[str, ...]
    #: The value's name as the tool's help shows it; None for a switch (a Go bool flag, a
    #: TCLAP SwitchArg).
    value: str | None
    #: What the flag does in the tool (its help, one line).
    meaning: str
    nhbench: str = ""
    refused: str = ""
    #: The tool's default, as its help gives it; "" when it has none.
    default: str = ""
    repeatable: bool = False
    #: The tool's commands that take the flag (Fortio's load, curl...); () for all of them.
    commands: tuple[str, ...] = ()
    apply: Callable[..., Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.names:
            raise ValueError("a ForeignFlag needs at least one name")
        if bool(self.nhbench) == bool(self.refused):
            raise ValueError(f"{self.names[0]}: exactly one of nhbench and refused is set")

    @property
    def name(self) -> str:
        """The spelling the tool's help lists first."""
        return self.names[0]

    def refusal(self, given: str | None = None) -> OptionsError:
        """The error that refuses this flag, named as the user typed it: one line (the front-end
        prints it and exits 2 before anything is sent or written)."""
        return OptionsError(f"{given or self.name}: {self.refused}; nothing was sent")
