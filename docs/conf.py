"""Sphinx configuration of kubeloop's documentation (`make docs`; warnings are errors)."""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kubeloop.version import __version__  # noqa: E402

project = "kubeloop"
author = "the kubeloop authors"
copyright = "2026, the kubeloop authors"
release = version = __version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.viewcode", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
# Markdown files link to repository files (`../examples/...`) that are not pages of the site.
suppress_warnings = ["myst.xref_missing"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_default_options: dict[str, object] = {}
autodoc_preserve_defaults = True
# Type hints name types of libraries whose documentation is not part of this site.
nitpicky = False

html_theme = "furo"
html_title = f"kubeloop {release}"
