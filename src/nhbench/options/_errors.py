"""One formatter for every option error: one line that names the option as the user gave it.

``--rps: must be >= 0 and <= 1000000 (got -1)`` on the command line, ``rps: ...`` from
Python, ``--config server.yaml: static_delay: ...`` for a value that came from a config file.
The option is named by its flag, read from the model (`flag_of`), so the message follows the
flag when the flag is renamed; nested models (the server's ResponseOptions, its linear delay)
are walked the same way for every model.

Validators raise ValueError with a message written to follow "<option>: " (the parsers in
`_values`), or a PydanticCustomError of one of these kinds when the error is about two
options at once (``{a}`` and ``{b}`` are field names, named here by their flags):

* ``options_conflict``: "{a}: mutually exclusive with {b}"
* ``options_needs``: "{a}: needs {b}" (b: an option, or a list of options any of which does)
* ``options_order``: "{a}: must be shorter than {b}, or the server never answers"
* ``options_over_cap``: "{a}: {msg}", where {b} in msg is the cap's name
* ``options_file``: "{a}: {msg}"
* ``options_conflict_port``: the message as it is (it names several options)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

import annotated_types
from pydantic import BaseModel, ValidationError

from ._flags import flag_of, flag_spec, flattened_models, nested_model

__all__ = ["error_message", "format_validation_error", "option_name"]


def _show(value: object) -> str:
    # Numbers typed on the command line arrive as strings; showing them without quotes gives
    # "rps: must be >= 0 and <= 1000000 (got -1)", which is what the user typed.
    if isinstance(value, str) and value and not any(ch.isspace() for ch in value):
        return value
    return repr(value)


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _range_text(model: type[BaseModel], field: str) -> str | None:
    info = model.model_fields.get(field)
    if info is None:
        return None
    lower = upper = None
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            lower = f">= {_number(item.ge)}"
        elif isinstance(item, annotated_types.Gt):
            lower = f"> {_number(item.gt)}"
        elif isinstance(item, annotated_types.Le):
            upper = f"<= {_number(item.le)}"
        elif isinstance(item, annotated_types.Lt):
            upper = f"< {_number(item.lt)}"
    if lower and upper:
        return f"must be {lower} and {upper}"
    if lower or upper:
        return f"must be {lower or upper}"
    return None


_TYPE_MESSAGES = {
    "int_parsing": "must be an integer",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "dict_type": "must be a mapping",
    "missing": "is required",
}


def error_message(model: type[BaseModel], field: str | None, error: Any) -> str:
    """The text for one pydantic error, without the option name (shared with the server)."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        message = (_range_text(model, field) if field else None) or error["msg"]
    elif kind == "literal_error":
        message = f"must be one of {ctx.get('expected', '')}"
    elif kind == "value_error":
        message = str(ctx.get("error", error["msg"]))
    else:
        message = _TYPE_MESSAGES.get(kind, error["msg"])
    # Say what was given, unless the message already does, or the input is a whole list
    # (the message then names the offending item, which is more useful than the list).
    if (
        "(got " not in message
        and kind != "missing"
        and not isinstance(error.get("input"), (list, tuple, dict))
    ):
        message += f" (got {_show(error.get('input'))})"
    return message


def _locate(model: type[BaseModel], loc: Sequence[Any]) -> tuple[str, type[BaseModel], str | None]:
    """(option name, model that holds the field, field name) for a pydantic error location.

    Fields of a flattened model (``Flag(flatten=True)``) are named without their container,
    as their flags are (``static_delay``, not ``response.static_delay``); fields of other
    nested models are dotted (``concurrency_based_linear_delay.minimal_delay``). The walk
    stops at the first part that is not a field holding a model (a list index, a dict key).
    """
    current, holder = model, model
    names: list[str] = []
    field: str | None = None
    flattened: str | None = None
    for part in loc:
        if not isinstance(part, str) or part not in current.model_fields:
            break
        info = current.model_fields[part]
        sub = nested_model(info)
        spec = flag_spec(info)
        if sub is not None and spec is not None and spec.flatten and not names:
            flattened, current, holder, field = part, sub, sub, None
            continue
        names.append(part)
        holder, field = current, part
        if sub is None:
            break
        current, holder, field = sub, sub, None
    if not names:
        return (flattened or "", holder, None)
    return (".".join(names), holder, field)


def option_name(model: type[BaseModel], loc: Sequence[Any]) -> str | None:
    """The top-level option an error location is about (``static_delay`` for the server's
    ``("response", "static_delay")``), or None; what `OptionsError.option` carries."""
    return _locate(model, loc)[0].split(".", 1)[0] or None


def _known_names(model: type[BaseModel]) -> list[str]:
    """Every option name `model` takes at its level: its fields and those flattened into it."""
    names = list(model.model_fields)
    for _name, sub in flattened_models(model):
        names += _known_names(sub)
    return names


def format_validation_error(
    exc: ValidationError,
    model: type[BaseModel] | None = None,
    *,
    cli: bool = False,
    cli_keys: Iterable[str] | None = None,
    config_name: str | None = None,
) -> str:
    """Turn a pydantic ValidationError into one line naming each option and what is allowed.

    ``rps: must be >= 0 and <= 1000000 (got -1)``; with ``cli=True`` the options are named
    by their flags: ``--rps: must be >= 0 and <= 1000000 (got -1)``. Several errors are
    joined with "; ". `model` is the model that was validated (default: the run's
    `Options`). With `config_name`, options not in `cli_keys` (the flags the user typed; all
    of them when None) came from that config file and are named ``--config FILE: key``
    (``config FILE: key`` from Python).
    """
    if model is None:
        from ._run import Options

        model = Options
    root_model = model
    given = set(cli_keys) if cli_keys is not None else None

    def name_of(option: str) -> str:
        if not option:
            return ""
        root, _, rest = option.partition(".")
        if config_name is not None and (given is None or root not in given):
            return f"--config {config_name}: {option}" if cli else f"config {config_name}: {option}"
        if not cli:
            return option
        flag = flag_of(root_model, root)
        return f"{flag} {rest}" if rest else flag

    parts: list[str] = []
    for error in exc.errors(include_url=False):
        loc = error.get("loc") or ()
        kind = error["type"]
        ctx = error.get("ctx") or {}
        option, holder, field = _locate(root_model, loc)
        if kind == "options_conflict":
            parts.append(f"{name_of(ctx['a'])}: mutually exclusive with {name_of(ctx['b'])}")
        elif kind == "options_needs":
            # b is one option, or a list of options any one of which would do.
            needed = ctx["b"] if isinstance(ctx["b"], (list, tuple)) else [ctx["b"]]
            named = [name_of(str(name)) for name in needed]
            either = " or ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)
            parts.append(f"{name_of(ctx['a'])}: needs {either}")
        elif kind == "options_order":
            parts.append(f"{name_of(ctx['a'])}: must be shorter than {name_of(ctx['b'])}, "
                         f"or the server never answers")
        elif kind == "options_over_cap":
            # The cap is named as the user gave it (flag, config key or keyword).
            message = str(ctx["msg"]).replace(str(ctx["b"]), name_of(str(ctx["b"])))
            parts.append(f"{name_of(ctx['a'])}: {message}")
        elif kind == "options_conflict_port":
            parts.append(str(error["msg"]))
        elif kind == "options_file":
            parts.append(f"{name_of(ctx['a'])}: {ctx['msg']}")
        elif kind == "extra_forbidden":
            bad = str(loc[-1]) if loc else "?"
            # At the top, a misspelt option is suggested as the user would type it (a flag);
            # inside a nested mapping, as the key it is.
            close = difflib.get_close_matches(bad, _known_names(holder), n=1)
            full = f"{option}.{bad}" if option else bad
            hint = f" (did you mean {name_of(close[0]) if not option else close[0]}?)" \
                if close else ""
            parts.append(f"{name_of(full)}: unknown option{hint}")
        else:
            message = error_message(holder, field, error)
            prefix = f"{name_of(option)}: " if option else ""
            parts.append(prefix + message)
    return "; ".join(parts).replace("\n", " ")
