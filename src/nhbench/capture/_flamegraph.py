"""A flame graph as a self-contained SVG, from folded stacks.

Why hand-written: the FlameGraph scripts are Perl (the Intel script cloned the repository on
the target), and no well-kept Python package renders folded stacks into an SVG without
external tools. A search of PyPI and the documentation index found only
``pyinferno`` (last release 2022), ``pyflamegraph`` (a 2015 wrapper that shells out to
flamegraph.pl) and ``flameprof`` (cProfile input only, 2018); inferno itself is a Rust crate.
The renderer here is about 150 lines and has no dependency.

Layout follows flamegraph.pl: the root at the bottom, each frame a rectangle whose width is
proportional to its samples, children above their parent, siblings in alphabetical order
(so the same stacks always give the same picture), frames narrower than `min_width` pixels
left out together with everything above them. Each frame carries a ``<title>`` tooltip
(``name (N samples, P%)``), which every browser shows on hover without JavaScript, and a
label truncated with ``..`` to what fits. Colours come from a hash of the frame name (the
"hot" red-orange-yellow palette; kernel frames, suffixed ``_[k]``, in a cooler orange-brown
one), so a function has the same colour in every graph of a campaign. The output has no
script, no external reference and no timestamp: the same input gives byte-identical SVG.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

__all__ = ["FlameNode", "build_tree", "render_flamegraph"]

_FONT_FAMILY = "Verdana, DejaVu Sans, sans-serif"
# Average glyph width relative to the font size for Verdana-like fonts (flamegraph.pl uses
# 0.59); used only to decide how many characters of a label fit in a frame.
_CHAR_WIDTH = 0.59


@dataclass
class FlameNode:
    """One frame in the merged call tree; `value` counts the samples at or above it."""

    name: str
    value: int = 0
    children: dict[str, FlameNode] = field(default_factory=dict)


def build_tree(folded: Mapping[str, int]) -> FlameNode:
    """Merge ``{stack: count}`` into a tree whose root (named ``all``) holds every sample."""
    root = FlameNode("all")
    for stack, count in folded.items():
        if count <= 0:
            continue
        root.value += count
        node = root
        for frame in stack.split(";"):
            node = node.children.setdefault(frame, FlameNode(frame))
            node.value += count
    return root


def _colour(name: str) -> str:
    # md5 rather than hash(): Python salts str hashes per process, and the colour must be
    # the same in every run. Not a security use.
    digest = hashlib.md5(name.encode("utf-8"), usedforsecurity=False).digest()
    a, b, c = digest[0] / 255, digest[1] / 255, digest[2] / 255
    if name.endswith("_[k]"):
        return f"rgb({int(200 + 55 * a)},{int(120 + 60 * b)},{int(40 + 40 * c)})"
    return f"rgb({int(205 + 50 * a)},{int(230 * b)},{int(55 * c)})"


def _label(name: str, width: float, font_size: float) -> str:
    fits = int(width / (font_size * _CHAR_WIDTH))
    if fits < 3:
        return ""
    if len(name) <= fits:
        return name
    return name[: fits - 2] + ".."


def render_flamegraph(
    folded: Mapping[str, int],
    *,
    title: str = "Flame Graph",
    subtitle: str | None = None,
    width: int = 1200,
    frame_height: int = 16,
    font_size: float = 12.0,
    min_width: float = 0.1,
) -> str:
    """Render folded stacks (``{"a;b;c": samples}``) as an SVG document (a str).

    `min_width` is in pixels: a frame narrower than that is not drawn (nor anything above
    it), which keeps graphs of long recordings small. With no samples the SVG says so.
    """
    root = build_tree(folded)
    total = root.value
    pad = 10.0
    top = font_size * 3 + (font_size * 1.4 if subtitle else 0)
    usable = width - 2 * pad

    rects: list[str] = []
    depth_max = 0

    def walk(node: FlameNode, x: float, depth: int) -> None:
        nonlocal depth_max
        node_width = node.value / total * usable
        if node_width < min_width:
            return
        depth_max = max(depth_max, depth)
        rects.append(_frame_svg(node, total, x, depth, node_width, frame_height, font_size))
        child_x = x
        for name in sorted(node.children):
            child = node.children[name]
            walk(child, child_x, depth + 1)
            child_x += child.value / total * usable

    if total > 0:
        walk(root, pad, 0)
    levels = depth_max + 1 if total > 0 else 1
    height = int(top + levels * frame_height + pad * 2 + font_size)

    # Frames are drawn in a group translated to the root's row, each depth one row higher
    # (negative y), so the tree is laid out before the total height is known.
    base = top + levels * frame_height
    out = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" '
            f'font-family={quoteattr(_FONT_FAMILY)} font-size="{font_size:g}">'
        ),
        (
            "<style>g.f:hover rect{stroke:#000;stroke-width:0.5}"
            "g.f text{pointer-events:none}</style>"
        ),
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f8f8f8"/>',
        (
            f'<text x="{width / 2:g}" y="{font_size * 1.8:g}" text-anchor="middle" '
            f'font-size="{font_size + 5:g}">{escape(title)}</text>'
        ),
    ]
    if subtitle:
        out.append(
            f'<text x="{width / 2:g}" y="{font_size * 3.2:g}" text-anchor="middle" '
            f'fill="#555">{escape(subtitle)}</text>'
        )
    if total == 0:
        out.append(
            f'<text x="{width / 2:g}" y="{top + frame_height:g}" text-anchor="middle">'
            "no samples</text>"
        )
    out.append(f'<g transform="translate(0,{base - frame_height:g})">')
    out.extend(rects)
    out.append("</g>")
    out.append(
        f'<text x="{pad:g}" y="{height - pad:g}" fill="#555" font-size="{font_size - 1:g}">'
        f"{total} samples; hover a frame for its share</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _frame_svg(
    node: FlameNode,
    total: int,
    x: float,
    depth: int,
    width: float,
    frame_height: int,
    font_size: float,
) -> str:
    # Each depth is one row up from the root's row (y = 0 inside the translated group).
    y = -depth * float(frame_height)
    percent = 100.0 * node.value / total
    samples = "sample" if node.value == 1 else "samples"
    tooltip = f"{node.name} ({node.value} {samples}, {percent:.2f}%)"
    label = _label(node.name, width - 6, font_size)
    baseline = y + frame_height - (frame_height - font_size) / 2 - 2
    text = (
        f'<text x="{x + 3:.2f}" y="{baseline:.2f}">{escape(label)}</text>' if label else ""
    )
    fill = "rgb(220,220,220)" if depth == 0 else _colour(node.name)
    return (
        f'<g class="f"><title>{escape(tooltip)}</title>'
        f'<rect x="{x:.2f}" y="{y:.2f}" width="{width:.2f}" height="{frame_height - 1}" rx="2" '
        f'fill="{fill}" data-samples="{node.value}"/>{text}</g>'
    )
