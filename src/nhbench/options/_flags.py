"""Command-line flags derived from the option models.

A field becomes a flag by carrying a `Flag` in its annotation::

    rps: Annotated[float, Flag(metavar="N")] = Field(default=5.0, description="...")

`add_model_flags` then adds ``--rps N`` to an argparse parser, with the field's description
and default as the help text, and the value stored under the field's name, so that parsing
the command line yields exactly the keyword arguments the model takes. Values are kept as
strings: the model validates them, so the CLI, the Python API and scenario files accept the
same syntax and give the same messages.

This module is the only place that knows how a field is spelled on the command line; the
error formatter (`flag_of`) and the generated documentation tables read it from here too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = [
    "Flag",
    "add_model_flags",
    "field_owner",
    "flag_of",
    "flag_spec",
    "flagged_fields",
    "flattened_models",
    "model_flags",
    "nested_model",
]


@dataclass(frozen=True)
class Flag:
    """How one option field is spelled on the command line.

    `name` defaults to ``--`` plus the field name with ``-`` for ``_``; `aliases` are further
    spellings (Nighthawk's or Fortio's, a short ``-k``). A bool field is a switch
    (``store_true``) unless `metavar` is given; `append` makes the flag repeatable. `default`
    is the "Default X." text of the help: derived from the field's default when None, left
    out when "". `consts` are extra switches that store a fixed value (``--h2`` stores
    ``protocol=http2``). `group` is the help section; `positional` makes the field an
    argument rather than a flag (the URI).
    """

    metavar: str | None = None
    name: str | None = None
    aliases: tuple[str, ...] = ()
    append: bool = False
    default: str | None = None
    group: str | None = None
    consts: tuple[tuple[str, str], ...] = ()
    positional: bool = False
    optional: bool = False  # a positional that may be left out (the URI with several targets)
    hidden: bool = False
    flatten: bool = False
    # A flag whose value may be left out: given alone, it stores `const` (``--ray`` alone is
    # ``--ray auto``).
    const: str | None = None


def nested_model(info: FieldInfo) -> type[BaseModel] | None:
    """The model a field holds (``LinearDelay`` for ``LinearDelay | None``), or None."""
    annotation = info.annotation
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def flattened_models(model: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
    """(field name, model) for each field of `model` whose own fields are flags of `model`'s
    command (``Flag(flatten=True)``: ServerOptions' ``response`` gives --static-delay...)."""
    for name, info in model.model_fields.items():
        spec = flag_spec(info)
        sub = nested_model(info)
        if spec is not None and spec.flatten and sub is not None:
            yield name, sub


def field_owner(model: type[BaseModel], field_name: str) -> type[BaseModel] | None:
    """The model that declares option `field_name` for `model`'s command: `model` itself or
    a model flattened into it; None when no such field exists."""
    if field_name in model.model_fields:
        return model
    for _name, sub in flattened_models(model):
        owner = field_owner(sub, field_name)
        if owner is not None:
            return owner
    return None


def flag_spec(info: FieldInfo) -> Flag | None:
    """The `Flag` a field carries, or None for a field with no command-line spelling."""
    for item in info.metadata:
        if isinstance(item, Flag):
            return item
    return None


def flagged_fields(model: type[BaseModel]) -> Iterator[tuple[str, FieldInfo, Flag]]:
    """(field name, field info, flag) for every field of `model` that has a flag, in order."""
    for name, info in model.model_fields.items():
        spec = flag_spec(info)
        if spec is not None:
            yield name, info, spec


def flag_of(model: type[BaseModel], field_name: str) -> str:
    """How the user typed option `field_name` on the command line (``--rps``, ``URI``).

    Fields of models flattened into `model` are found too; a name that is no field at all
    (an unknown option) is spelled the default way, ``--`` plus the name with dashes.
    """
    owner = field_owner(model, field_name) or model
    info = owner.model_fields.get(field_name)
    spec = flag_spec(info) if info is not None else None
    if spec is None:
        return "--" + field_name.replace("_", "-")
    if spec.positional:
        return spec.metavar or field_name.upper()
    return spec.name or "--" + field_name.replace("_", "-")


def model_flags(model: type[BaseModel]) -> dict[str, str]:
    """Every command-line spelling of `model`'s fields (aliases included) → field name."""
    flags: dict[str, str] = {}
    for name, _info, spec in flagged_fields(model):
        if spec.flatten:
            sub = nested_model(_info)
            if sub is not None:
                flags.update(model_flags(sub))
            continue
        if spec.positional:
            continue
        for flag in (flag_of(model, name), *spec.aliases, *(c for c, _ in spec.consts)):
            flags[flag] = name
    return flags


def value_text(value: object) -> str:
    """An option value as a user types it: ``5`` (not 5.0), ``on``/``off``, ``50,90,99``.
    The help's "Default X." and docs/options.md's default column both write it so."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, tuple):
        return ",".join(value_text(item) for item in value)
    return str(value)


def _default_text(info: FieldInfo, spec: Flag) -> str:
    if spec.default is not None:
        return spec.default
    value = info.default
    if value is PydanticUndefined or value is None or value is False or value in ((), {}, 0):
        return ""
    return value_text(value)


def help_text(info: FieldInfo, spec: Flag) -> str:
    """The help of a field's flag: its description and, when it has one, its default."""
    text = info.description or ""
    default = _default_text(info, spec)
    if default:
        text += f" Default {default}."
    return text


def add_model_flags(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    *,
    skip: Iterable[str] = (),
    only: Callable[[str], bool] | None = None,
) -> None:
    """Add a flag for every flagged field of `model` to `parser`.

    Fields named in `skip` (field names) are left out, as are fields `only` rejects.
    Arguments are added with ``dest=<field name>`` and no default (the parser should use
    ``argument_default=argparse.SUPPRESS``), so that only what the user typed reaches the
    model and everything else takes the model's default.
    """
    _add_flags(parser, model, frozenset(skip), only, {})


def _add_flags(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    skipped: frozenset[str],
    only: Callable[[str], bool] | None,
    groups: dict[str, Any],
) -> None:
    for name, info, spec in flagged_fields(model):
        if name in skipped or (only is not None and not only(name)):
            continue
        if spec.flatten:
            sub = nested_model(info)
            if sub is not None:
                _add_flags(parser, sub, skipped, only, groups)
            continue
        target: Any = parser
        if spec.group is not None:
            if spec.group not in groups:
                groups[spec.group] = parser.add_argument_group(spec.group)
            target = groups[spec.group]
        help_ = argparse.SUPPRESS if spec.hidden else help_text(info, spec).replace("%", "%%")
        if spec.positional:
            target.add_argument(
                name, metavar=spec.metavar or name.upper(), help=help_,
                **({"nargs": "?"} if spec.optional else {}),
            )
            continue
        flags = [flag_of(model, name), *spec.aliases]
        # Short aliases (-k, -p) read best first, as argparse lists them in order.
        flags.sort(key=lambda f: (not (f.startswith("-") and not f.startswith("--")),))
        kwargs: dict[str, Any] = {"dest": name, "help": help_}
        if spec.metavar is None and info.annotation is bool:
            kwargs["action"] = "store_true"
        else:
            kwargs["metavar"] = spec.metavar or "VALUE"
            if spec.append:
                kwargs["action"] = "append"
            elif spec.const is not None:
                kwargs["nargs"] = "?"
                kwargs["const"] = spec.const
        target.add_argument(*flags, **kwargs)
        for const_flag, value in spec.consts:
            target.add_argument(
                const_flag, dest=name, action="store_const", const=value,
                help=f"Same as {flag_of(model, name)} {value}.",
            )


