"""The list of ``nhbench`` commands: one `Command` a command, in the order of ``nhbench --help``.

A command is a module of this package that defines two functions:

* ``add_parser(commands, command)`` adds its subparser to `commands` (an argparse
  subparsers action) with ``command.name`` and ``command.help`` and returns it;
* ``run(args, parser)`` carries it out and returns the exit status.

A front-end with another tool's grammar (``nhbench fortio``, ``nhbench nighthawk``: Go's
`flag` package and TCLAP, where argparse would cluster and abbreviate) is a `Command` with
`raw` set: its module defines ``main(argv) -> int`` too, and `nhbench.cli.main` hands it every
argument after the command's name untouched; its ``add_parser`` only lists it in ``nhbench
--help``.

The module is named here, not imported: ``nhbench --version`` and ``nhbench COMMAND
--version`` are answered from the names alone, and most command modules import the option
models (pydantic), which is most of what a start costs (docs/benchmarks.md, "Start-up").
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

__all__ = ["COMMANDS", "Command"]

if TYPE_CHECKING:
    from ._common import Parser

    #: What ``add_parser`` adds its parser to (the parsers it makes are `Parser`s).
    Subparsers: TypeAlias = argparse._SubParsersAction[Parser]
    AddParser: TypeAlias = Callable[[Subparsers, "Command"], argparse.ArgumentParser]
    Run: TypeAlias = Callable[[argparse.Namespace, argparse.ArgumentParser], int]


# A NamedTuple rather than a dataclass: `dataclasses` imports `inspect` (and `ast`, `dis`),
# which ``nhbench --version`` has no other use for.
class Command(NamedTuple):
    """One ``nhbench`` command."""

    #: What follows ``nhbench`` on the command line.
    name: str
    #: The module of this package that defines ``add_parser`` and ``run``.
    module: str
    #: Its line in ``nhbench --help``.
    help: str
    #: The module parses its own arguments (``main(argv)``), argparse never sees them.
    raw: bool = False

    @property
    def add_parser(self) -> AddParser:
        """The module's function that adds the command's parser (importing the module)."""
        add: AddParser = self._module().add_parser
        return add

    @property
    def run(self) -> Run:
        """The module's function that carries the command out."""
        run: Run = self._module().run
        return run

    @property
    def main(self) -> Callable[[list[str]], int]:
        """A raw command's entry point: its arguments as given, its exit status."""
        main: Callable[[list[str]], int] = self._module().main
        return main

    def _module(self) -> Any:
        from importlib import import_module

        return import_module(self.module, __package__)


COMMANDS: tuple[Command, ...] = (
    Command("run", "._run", "run a benchmark against a URI"),
    Command("server", "._server",
            "run the test server (Nighthawk response options, Fortio echo)"),
    Command("demo", "._demo", "start the embedded test server and benchmark it for 5 s"),
    Command("sweep", "._sweep",
            "step the offered load and record every step in a campaign directory"),
    Command("report", "._report",
            "re-render a campaign's reports, or write one result's HTML page"),
    Command("browse", "._browse",
            "browse and compare the results in a directory in a web browser"),
    Command("ui", "._ui",
            "the result browser plus a form that starts runs, live charts and Fortio's "
            "REST API"),
    Command("transform", "._transform",
            "write a result file (nhbench's or Nighthawk's JSON) in another output format"),
    Command("compare", "._compare",
            "compare two runs (or directories of runs): regressed, improved or no "
            "significant change, with confidence intervals"),
    Command("adapt", "._adapt", "search for the highest rate that still meets the SLO"),
    Command("calibrate", "._calibrate",
            "measure this host's timer jitter, clock, floor and noise, and the smallest "
            "latency difference a run can resolve here"),
    Command("service", "._service",
            "serve Nighthawk's gRPC service API (NighthawkService/ExecutionStream)"),
    Command("fortio", "._fortio",
            "Fortio's own command line: nhbench fortio load|curl|report|nc|grpcping|...",
            raw=True),
    Command("nighthawk", "._nighthawk",
            "run Nighthawk's client, transform, service or test-server command line",
            raw=True),
    Command("compat", "._compat",
            "install wrappers named fortio, nighthawk_client... that run nhbench's front-ends"),
    Command("version", "._version",
            "print the version, the commit, the C libraries and the build's options"),
)
