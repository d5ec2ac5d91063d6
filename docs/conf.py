"""Sphinx configuration of the swh_like_scheduler documentation (docs/README.md)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "swh_like_scheduler"
author = "the swh_like_scheduler authors"
copyright = "the swh_like_scheduler authors, GPL-3.0-or-later"

extensions = [
    "myst_parser",
    "sphinx_click",
    "swh_generated",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
# the docs' own README, the build and the generated fragments (included by
# the reference pages, never pages of their own)
exclude_patterns = ["README.md", "_build", "**/_generated"]

myst_enable_extensions = ["colon_fence", "deflist"]
# `[text](page.md#a-heading)` links reach headings down to this level
myst_heading_anchors = 3

nitpicky = True
# curly quotes and ellipses, but "--" stays two hyphens: the options quoted in
# the commands' help (``--index-url``) are not en dashes
smartquotes_action = "qe"
suppress_warnings: list[str] = []

try:
    import furo  # noqa: F401

    html_theme = "furo"
except ImportError:  # the docs extra installs furo; alabaster ships with Sphinx
    html_theme = "alabaster"
html_title = "swh_like_scheduler"
html_static_path = ["_static"]
html_css_files = ["site.css"]

# no address outside the repository is fetched by `-b linkcheck` when the
# machine has no way out (docs/README.md)
linkcheck_ignore = [r"https?://"]
