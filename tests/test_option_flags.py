"""Every option field has a flag and every flag a field: the CLI is derived from the models.

The check reads the real parser (`build_parser()`) and the models' fields, so a field added
without a `Flag`, a flag added by hand to a subcommand, or a help text that drifted from the
field's description fails here, naming the field or flag.
"""

from __future__ import annotations

import argparse
import re

import pytest
from pydantic import BaseModel

from nhbench.cli import build_parser
from nhbench.options import Flag, Options, ResponseOptions, ServerOptions, flag_of

# (subcommand, the models whose fields are its options, flags that are not options).
# The first model is the one the subcommand validates (flags are named from it); the others
# are reached through it (ResponseOptions is flattened into ServerOptions). To cover another
# subcommand, add a row: ("sweep", (SweepOptions, ...), {"-h", ...}).
COMMANDS: list[tuple[str, tuple[type[BaseModel], ...], frozenset[str]]] = [
    # --version is on every subcommand, as plumbing like -h.
    # --repeat runs the options N times (docs/trust.md): the command's, not an option's.
    ("run", (Options,), frozenset({"-h", "--version", "--repeat"})),
    ("server", (ServerOptions, ResponseOptions),
     frozenset({"-h", "--version", "--config", "--print-stats-json"})),
]
IDS = [command for command, _, _ in COMMANDS]


def subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]  # type: ignore[no-any-return]
    raise AssertionError("no subcommands")


def flag_of_field(model: type[BaseModel], name: str) -> Flag | None:
    for item in model.model_fields[name].metadata:
        if isinstance(item, Flag):
            return item
    return None


def option_fields(models: tuple[type[BaseModel], ...]) -> dict[str, type[BaseModel]]:
    """Field name -> model, for every field that is an option (not a flattened container)."""
    fields: dict[str, type[BaseModel]] = {}
    for model in models:
        for name in model.model_fields:
            spec = flag_of_field(model, name)
            if spec is not None and spec.flatten:
                continue
            assert name not in fields, f"{name} is a field of two models of one command"
            fields[name] = model
    return fields


def option_actions(
    parser: argparse.ArgumentParser, not_options: frozenset[str]
) -> list[argparse.Action]:
    return [action for action in parser._actions
            if not set(action.option_strings) & not_options]


@pytest.mark.parametrize(("command", "models", "not_options"), COMMANDS, ids=IDS)
def test_every_field_has_a_flag_and_every_flag_a_field(
    command: str, models: tuple[type[BaseModel], ...], not_options: frozenset[str]
) -> None:
    parser = subparser(command)
    fields = option_fields(models)
    without_flag = [name for name, model in fields.items() if flag_of_field(model, name) is None]
    assert without_flag == [], f"fields of {command} without a Flag: {without_flag}"
    dests = {action.dest for action in option_actions(parser, not_options)}
    assert dests - set(fields) == set(), f"{command}: flags that are no field"
    assert set(fields) - dests == set(), f"{command}: fields that are no flag"
    # The only flags that are no field are the documented ones, and they are all there.
    spelled = {s for action in parser._actions for s in action.option_strings}
    assert not_options - {"--help"} <= spelled


@pytest.mark.parametrize(("command", "models", "not_options"), COMMANDS, ids=IDS)
def test_each_flag_is_spelled_and_described_by_its_field(
    command: str, models: tuple[type[BaseModel], ...], not_options: frozenset[str]
) -> None:
    fields = option_fields(models)
    for action in option_actions(subparser(command), not_options):
        model = fields[action.dest]
        info = model.model_fields[action.dest]
        spec = flag_of_field(model, action.dest)
        assert spec is not None
        if isinstance(action, argparse._StoreConstAction) and not isinstance(
            action, argparse._StoreTrueAction
        ):
            # A switch for one value of the field (--h2 is --protocol http2).
            assert action.help == f"Same as {flag_of(models[0], action.dest)} {action.const}."
            assert (action.option_strings[0], str(action.const)) in spec.consts
            continue
        if spec.positional:
            assert action.option_strings == [] and action.metavar == spec.metavar
        else:
            assert flag_of(models[0], action.dest) in action.option_strings
            assert set(action.option_strings) == {flag_of(model, action.dest), *spec.aliases}
        if spec.hidden:
            assert action.help == argparse.SUPPRESS
            continue
        description = info.description or ""
        assert description, f"{action.dest} has no description"
        help_text = (action.help or "").replace("%%", "%")
        assert help_text.startswith(description), action.dest
        rest = help_text[len(description):]
        assert rest == "" or re.fullmatch(r" Default .+\.", rest), (action.dest, rest)
