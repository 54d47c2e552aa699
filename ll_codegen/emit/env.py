"""Where the Jinja2 templates live and the one environment every renderer uses.

The templates (``templates/``) only loop over plain data and substitute it:
strict undefined names (a missing value is an error, never an empty string),
no autoescaping (the output is C++), ``trim_blocks``/``lstrip_blocks`` so
block tags on their own lines leave no blank lines behind.
"""
from __future__ import annotations

import functools
import os

import jinja2

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: installed: <package>/templates; editable install or checkout: <repo>/templates
TEMPLATES = next(p for p in (os.path.join(_PKG, "templates"), os.path.join(os.path.dirname(_PKG), "templates"))
                 if os.path.isdir(p))


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    """The Jinja2 environment over ``TEMPLATES``: one per process, so each template is parsed and
    compiled once (its cache reloads a template whose file changed); nothing may modify it."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                              autoescape=False)
