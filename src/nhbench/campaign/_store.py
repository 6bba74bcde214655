"""The campaign directory on disk: creating it, writing each step the moment it ends,
resuming, and loading it back (`load_campaign`).

Every file is written atomically (a temporary file in the same directory, fsync, rename,
fsync of the directory), so a crash or a SIGKILL leaves either the old file or the new one,
never half of one. The manifest is the commit point: a step is finished once the manifest
lists it. Its ``result.json`` and ``step.json`` are written first, so a listed step always
has both; a step directory the manifest does not list is the remains of an unfinished step,
and `--resume` deletes it and runs that step again from scratch.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._exceptions import CampaignError
from .._io import write_text
from .._result import Result
from ..hosts import MachineFacts
from ._html import campaign_html
from ._models import CampaignManifest, StepRecord, SweepPlan
from ._table import step_view

__all__ = [
    "MANIFEST_NAME",
    "Campaign",
    "CampaignStore",
    "atomic_write_text",
    "check_resume",
    "is_campaign",
    "load_campaign",
    "load_manifest",
    "step_directory",
]

MANIFEST_NAME = "manifest.json"
STEPS_DIR = "steps"


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old content or the new, never a mix
    (`nhbench._io`: temporary file, fsync, rename, fsync of the directory; a new file gets
    the mode open() would give it under the umask)."""
    write_text(path, text)


def step_directory(index: int, rate: float) -> str:
    """``steps/001-rps100``: the step number first so that listings sort in run order."""
    return f"{STEPS_DIR}/{index:03d}-rps{rate:g}"


def is_campaign(directory: Path) -> bool:
    return (Path(directory) / MANIFEST_NAME).is_file()


def load_manifest(directory: str | os.PathLike[str]) -> CampaignManifest:
    """Read DIR/manifest.json; CampaignError (one line) when DIR is not a readable campaign."""
    directory = Path(directory)
    path = directory / MANIFEST_NAME
    if not directory.is_dir():
        raise CampaignError(f"{str(directory)!r} is not a directory")
    if not path.is_file():
        raise CampaignError(f"{str(directory)!r} is not a campaign directory (no {MANIFEST_NAME})")
    try:
        return CampaignManifest.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "the file"
        raise CampaignError(
            f"{str(path)!r} is not a valid campaign manifest ({where}: {first['msg']})"
        ) from None
    except OSError as exc:
        raise CampaignError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None


def _now() -> datetime:
    return datetime.now(timezone.utc)


class CampaignStore:
    """A campaign directory being written by a sweep. Not thread-safe; one writer."""

    def __init__(self, directory: Path, manifest: CampaignManifest) -> None:
        self.directory = Path(directory)
        self.manifest = manifest

    # ---- opening ---------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str | os.PathLike[str], manifest: CampaignManifest) -> CampaignStore:
        """Create DIR (and its parents) and write the first manifest.

        An existing empty directory is fine; a campaign is refused (continue it with
        ``--resume``), and so is any other non-empty directory, whose files a campaign must
        not mix with or delete.
        """
        directory = Path(directory)
        if directory.exists():
            if not directory.is_dir():
                raise CampaignError(f"{str(directory)!r} exists and is not a directory")
            if is_campaign(directory):
                raise CampaignError(
                    f"{str(directory)!r} is already a campaign; continue it with --resume "
                    f"{directory} or choose another --out"
                )
            if any(directory.iterdir()):
                raise CampaignError(
                    f"{str(directory)!r} is not empty and is not a campaign; choose another --out"
                )
        try:
            (directory / STEPS_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CampaignError(
                f"cannot create campaign directory {str(directory)!r}: {exc.strerror or exc}"
            ) from None
        store = cls(directory, manifest)
        store.save()
        return store

    @classmethod
    def resume(cls, directory: str | os.PathLike[str], manifest: CampaignManifest) -> CampaignStore:
        """Reopen DIR with `manifest` (from `check_resume`): delete what unfinished steps
        left behind and mark the campaign running again."""
        directory = Path(directory)
        store = cls(directory, manifest)
        finished = {step.directory for step in manifest.steps}
        steps_dir = directory / STEPS_DIR
        steps_dir.mkdir(exist_ok=True)
        for entry in steps_dir.iterdir():
            if f"{STEPS_DIR}/{entry.name}" not in finished:
                _remove(entry)
        for entry in directory.glob(".*.tmp"):
            _remove(entry)
        manifest.status = "running"
        manifest.stop_reason = None
        store.save()
        return store

    # ---- writing ---------------------------------------------------------------------------

    def save(self) -> None:
        """Write the manifest (atomically)."""
        self.manifest.updated_at = _now()
        try:
            atomic_write_text(self.directory / MANIFEST_NAME,
                              self.manifest.model_dump_json(indent=2) + "\n")
        except OSError as exc:
            raise CampaignError(
                f"cannot write the campaign manifest in {str(self.directory)!r}: "
                f"{exc.strerror or exc}"
            ) from None

    def prepare_step(self, index: int, rate: float) -> Path:
        """A fresh, empty directory for step `index` (leftovers of an earlier try removed)."""
        path = self.directory / step_directory(index, rate)
        if path.exists():
            _remove(path)
        path.mkdir(parents=True)
        return path

    def discard_step(self, index: int, rate: float) -> None:
        """Remove an abandoned step's directory (interrupted before it finished)."""
        path = self.directory / step_directory(index, rate)
        if path.exists():
            _remove(path)

    def record_step(self, record: StepRecord, result: Result) -> None:
        """Write the step's result.json and step.json, then list it in the manifest."""
        path = self.directory / record.directory
        path.mkdir(parents=True, exist_ok=True)
        try:
            atomic_write_text(path / "result.json", result.model_dump_json(indent=2) + "\n")
            atomic_write_text(path / "step.json", record.model_dump_json(indent=2) + "\n")
        except OSError as exc:
            raise CampaignError(
                f"cannot write step {record.index} in {str(path)!r}: {exc.strerror or exc}"
            ) from None
        self.manifest.steps.append(record)
        self.save()

    def finish(self, status: str, reason: str | None = None) -> None:
        self.manifest.status = status  # type: ignore[assignment]
        self.manifest.stop_reason = reason
        self.save()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


# ---- resume --------------------------------------------------------------------------------


def _plan_difference(old: SweepPlan, new: SweepPlan, done: Sequence[StepRecord]) -> str | None:
    """Why `new` cannot continue a campaign planned as `old` with steps `done`, or None.

    Only extending is allowed: more steps after the planned ones, a higher extension limit,
    or turning extension on. Anything that changes what a finished step measured or when
    the sweep stops (duration, stop rules, the finished steps' rates) is refused, because
    the campaign would then mix steps that are not comparable.
    """
    if new.duration != old.duration:
        return f"duration {new.duration:g} s instead of {old.duration:g} s"
    if new.stop_on_blocked != old.stop_on_blocked:
        return "a different --stop-on-blocked"
    if list(new.stop_on_slo) != list(old.stop_on_slo):
        return f"stop rules {new.stop_on_slo} instead of {old.stop_on_slo}"
    if new.steps[: len(old.steps)] != old.steps[: len(new.steps)] or len(new.steps) < len(
        old.steps
    ):
        return f"steps {_rates(new.steps)} do not extend {_rates(old.steps)}"
    if old.extend:
        if not new.extend:
            return "--extend turned off"
        if new.step != old.step:
            return f"step {new.step:g} instead of {old.step:g}"
        # No limit is the highest limit of all; only lowering it is refused.
        if new.extend_limit is not None and (
            old.extend_limit is None or new.extend_limit < old.extend_limit
        ):
            return f"a lower --extend-limit ({new.extend_limit:g})"
    rates = [step.rps_per_worker for step in done]
    planned = new.steps[: len(rates)]
    if rates[: len(planned)] != planned:
        return f"steps {_rates(new.steps)} do not match the finished steps {_rates(rates)}"
    return None


def _rates(rates: Sequence[float]) -> str:
    return ",".join(f"{rate:g}" for rate in rates)


def check_resume(
    saved: CampaignManifest,
    *,
    options: dict[str, Any],
    plan: SweepPlan,
    ignore: Sequence[str] = (),
) -> CampaignManifest:
    """The manifest to continue with: `saved` with the (possibly extended) `plan`.

    `options` is the new run options as JSON (rps excluded); they must equal the saved ones
    except for the keys in `ignore` (the URL of an embedded test server, which gets a new port
    every time). CampaignError says what differs.
    """
    why = _plan_difference(saved.plan, plan, saved.steps)
    if why is not None:
        raise CampaignError(
            f"cannot resume with a different plan: {why}; a resumed campaign may only add "
            f"steps (a higher --max-rps, more --steps, --extend)"
        )
    old = {k: v for k, v in saved.options.items() if k not in ignore}
    new = {k: v for k, v in options.items() if k not in ignore}
    if old != new:
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        shown = ", ".join(
            f"{k}={new.get(k)!r} (campaign: {old.get(k)!r})" for k in keys[:3]
        )
        raise CampaignError(
            f"cannot resume with different run options: {shown}; resume with the campaign's "
            f"own options (give only --resume DIR) or start a new campaign"
        )
    manifest = saved.model_copy(deep=True)
    manifest.plan = plan
    return manifest


# ---- loading -------------------------------------------------------------------------------


class Campaign:
    """A campaign directory loaded back: ``nhbench.load_campaign("campaigns/...")``."""

    def __init__(self, directory: Path, manifest: CampaignManifest) -> None:
        self.directory = Path(directory)
        self.manifest = manifest

    @property
    def steps(self) -> list[StepRecord]:
        """The finished steps, in run order."""
        return list(self.manifest.steps)

    @property
    def facts(self) -> dict[str, MachineFacts]:
        """Machine facts by role ('target', 'loadgen')."""
        return dict(self.manifest.facts)

    def step(self, index: int) -> StepRecord:
        for record in self.manifest.steps:
            if record.index == index:
                return record
        known = ", ".join(str(step.index) for step in self.manifest.steps) or "none"
        raise KeyError(f"no step {index} in this campaign (finished steps: {known})")

    def result(self, index: int) -> Result:
        """The full `Result` of step `index` (1-based), read from its result.json."""
        path = self.directory / self.step(index).directory / "result.json"
        try:
            return Result.model_validate_json(path.read_bytes())
        except (OSError, ValidationError) as exc:
            raise CampaignError(f"cannot load {str(path)!r}: {exc}".splitlines()[0]) from None

    def rows(self) -> list[dict[str, Any]]:
        """One dict per step with the step table's DataFrame columns (`STEP_TABLE`, view
        ``frame``: latency in seconds, CPU in %)."""
        columns = step_view(self.manifest, "frame")
        return [{column.name: column.value(record) for column in columns}
                for record in self.manifest.steps]

    def to_dataframe(self) -> Any:
        """A pandas DataFrame with one row per step (see `rows` for the columns)."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "Campaign.to_dataframe() needs pandas: pip install pandas "
                "(or pip install 'nhbench[notebook]')"
            ) from None
        frame = pandas.DataFrame(self.rows())
        return frame.set_index("step") if len(frame) else frame

    def __repr__(self) -> str:
        return (f"Campaign({str(self.directory)!r}, status={self.manifest.status!r}, "
                f"steps={len(self.manifest.steps)})")

    def _repr_html_(self) -> str:
        """What a notebook shows: status, the step table and the sweep's charts."""
        return campaign_html(self.directory, self.manifest)


def load_campaign(directory: str | os.PathLike[str]) -> Campaign:
    """Load a campaign directory written by ``nhbench sweep`` (CampaignError if it is not)."""
    return Campaign(Path(directory), load_manifest(directory))
