"""The grammar of a sweep's target-side metrics: ``--scrape [NAME=]URL`` and
``--scrape-metric NAME[{label="value",...}]`` (docs/sweep.md, "Target metrics").

A scrape source is an http(s) URL serving Prometheus text (an exporter's ``/metrics``,
Envoy's ``/stats?format=prometheus``) or Envoy's plain ``/stats`` text, named so that its
series can be told apart in the step table when there are several (``NAME=URL``; the name
defaults to ``target``, or ``target1``, ``target2``... for several unnamed sources).

A metric selector names the series that become columns: a metric name, in which ``*``,
``?`` and ``[...]`` are globs (fnmatch's), and optionally labels that a series must carry
with exactly those values. The selector is matched against a series' sample name and its
family name (``envoy_cluster_upstream_rq_time`` selects that histogram's ``_bucket``,
``_sum`` and ``_count`` series).

Every error is a ValueError with a one-line message that shows the value; the options model
puts the flag in front of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_SCRAPE_TIMEOUT",
    "MetricSelector",
    "parse_metric_selector",
    "parse_scrape_sources",
]

#: Seconds a scrape may take before it counts as failed (--scrape-timeout).
DEFAULT_SCRAPE_TIMEOUT = 5.0

_SOURCE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
# A metric name with globs: Prometheus names, Envoy's dotted names (which may hold '|', ':'
# and '-', as in cluster.outbound|9080||reviews.default.svc.cluster.local.upstream_rq_total).
_SELECTOR_NAME = re.compile(r'^[^\s{}",=]+$')
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*')
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True)
class MetricSelector:
    """One ``--scrape-metric``: a name (with globs) and labels that must match exactly."""

    text: str
    name: str
    labels: tuple[tuple[str, str], ...] = ()

    def matches(self, name: str, family: str, labels: dict[str, str]) -> bool:
        """Whether a series (its sample name, family name and labels) is selected."""
        if not (fnmatchcase(name, self.name) or fnmatchcase(family, self.name)):
            return False
        return all(labels.get(key) == value for key, value in self.labels)


def _unescape(text: str, selector: str) -> str:
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        escaped = next(chars, "")
        if escaped not in _UNESCAPE:
            raise ValueError(f"{selector!r}: unknown escape '\\{escaped}' in a label value "
                             f"(use \\\\, \\\" or \\n)")
        out.append(_UNESCAPE[escaped])
    return "".join(out)


def parse_metric_selector(text: str) -> MetricSelector:
    """``envoy_cluster_upstream_rq_*{envoy_cluster_name="web"}`` -> `MetricSelector`."""
    raw = text.strip()
    if not raw:
        raise ValueError("empty metric selector: give a metric name such as "
                         "'http_requests_total' or 'envoy_cluster_*{envoy_cluster_name=\"web\"}'")
    name, brace, rest = raw.partition("{")
    name = name.strip()
    if not name or not _SELECTOR_NAME.match(name):
        raise ValueError(f"{text!r}: not a metric name (no spaces, quotes, commas, '=' or "
                         f"braces; globs *, ? and [...] are allowed)")
    labels: list[tuple[str, str]] = []
    if brace:
        if not rest.endswith("}"):
            raise ValueError(f"{text!r}: the labels must end with '}}'")
        body = rest[:-1]
        position = 0
        while body[position:].strip():
            match = _LABEL.match(body, position)
            if match is None:
                raise ValueError(f"{text!r}: labels are written label=\"value\", separated "
                                 f"by commas")
            key = match.group(1)
            if any(key == seen for seen, _ in labels):
                raise ValueError(f"{text!r}: label {key!r} given twice")
            labels.append((key, _unescape(match.group(2), text)))
            position = match.end()
            if position < len(body):
                if body[position] != ",":
                    raise ValueError(f"{text!r}: labels are written label=\"value\", "
                                     f"separated by commas")
                position += 1
    return MetricSelector(raw, name, tuple(labels))


def _check_url(url: str, given: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{given!r}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{given!r}: not an http:// or https:// URL with a host (for "
                         f"example http://10.0.0.5:15000/stats?format=prometheus)")
    del port
    return url


def parse_scrape_sources(values: object) -> dict[str, str]:
    """``["http://a:9901/stats", "mesh=http://b:15090/stats/prometheus"]`` (or a mapping of
    names to URLs, from a campaign file) -> {name: URL}, in the order given."""
    if values is None:
        return {}
    if isinstance(values, dict):
        items: list[tuple[str | None, str, str]] = [
            (str(name), str(url), f"{name}={url}") for name, url in values.items()]
    else:
        texts = [values] if isinstance(values, str) else list(values)  # type: ignore[call-overload]
        items = []
        for text in texts:
            text = str(text).strip()
            head, eq, tail = text.partition("=")
            # NAME=URL only when what precedes '=' is a name and what follows is a URL (a
            # URL's own query has '=' too: http://h/stats?format=prometheus).
            if eq and "://" not in head and _SOURCE_NAME.match(head):
                items.append((head, tail.strip(), text))
            else:
                items.append((None, text, text))
    unnamed = sum(1 for item in items if item[0] is None)
    sources: dict[str, str] = {}
    index = 0
    for label, url, given in items:
        if label is None:
            index += 1
            name = "target" if unnamed == 1 else f"target{index}"
        else:
            name = label
        if not _SOURCE_NAME.match(name):
            raise ValueError(f"{given!r}: the name must be 1-40 of A-Z a-z 0-9 _ . -")
        if name in sources:
            raise ValueError(f"{given!r}: two sources are named {name!r}; name them "
                             f"NAME=URL")
        sources[name] = _check_url(url, given)
    return sources
