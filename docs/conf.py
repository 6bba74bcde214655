"""Sphinx configuration of the docs site (docs/development.md, "The docs site").

`nox -s docs` (part of `./dev tests`) builds docs/ with warnings as errors (-W) and
nitpicky references (-n): a link to a page or a heading anchor that does not exist, a page
missing from the navigation or a docstring that does not render fails the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
# The API reference imports nhbench from the checkout (src/), not an installed build: the
# compiled extension is loaded only when a run or a test server starts, never at import.
sys.path.insert(0, str(DOCS.parent / "src"))

import nhbench  # noqa: E402

project = "nhbench"
version = release = nhbench.__version__
author = "nhbench developers"
copyright = "nhbench developers"

extensions = [
    # Markdown (MyST) pages and the Jupyter notebook (myst-nb reads .md and .ipynb).
    "myst_nb",
    "sphinx.ext.autodoc",
]

root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
# Broken links are what this build is for: every warning is an error (-W in the nox session).
nitpicky = True

# -- MyST -------------------------------------------------------------------------------------
# GitHub's heading anchors (what the pages link to: `trust.md#comparing-runs`), checked for
# every level of heading.
myst_heading_anchors = 6
myst_enable_extensions = ["strikethrough"]

# -- the notebook -----------------------------------------------------------------------------
# docs/notebooks/quickstart.ipynb is committed without outputs and executed by the test suite
# in a real kernel (tests/test_notebook.py); the site shows its code and text without running
# it (a run needs the compiled core and a kernel, which this build does not).
nb_execution_mode = "off"

# -- API reference (docs/api.md) --------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# pydantic's own machinery on the option and result models (its configuration dict and the
# hook it adds for private attributes) is not nhbench's API.
autodoc_default_options = {"exclude-members": "model_config, model_post_init"}

# -- HTML -------------------------------------------------------------------------------------
# Furo ships its own CSS and JavaScript and uses the system's fonts: the build fetches nothing.
html_theme = "furo"
html_title = f"nhbench {release}"
html_static_path: list[str] = []

# Type annotations in signatures are links when they name a documented object. Those that
# name something this reference does not document are left as text rather than warnings:
# the standard library's and third-party types (no intersphinx: the build fetches nothing),
# the types of private modules (the reference covers the public names, nhbench.__all__),
# and the validator/serializer metadata pydantic's Annotated fields carry.
nitpick_ignore_regex = [
    ("py:class", r"(collections\.abc|os|pathlib|datetime|typing|types|enum|ipaddress)\..+"),
    ("py:class", r"(pydantic|pydantic_core|pandas|hdrh)\..+"),
    ("py:class", r"nhbench\.(\w+\.)*_\w+(\..+)?"),
    ("py:class", r"(func|json_schema_input_type|return_type|when_used)=.+"),
    # An unqualified name is a deferred annotation that autodoc shows as written (a class's
    # constructor parameters: `Path`, `ResponseOptions`), not a reference a page makes.
    ("py:class", r"[A-Za-z_]\w*"),
]
