"""Thin entry point for a checkout: ``python cli.py ...`` runs ``llgen``.

The click application lives in ``ll_codegen/cli.py`` (installed as the ``llgen``
console script and runnable as ``python -m ll_codegen``); this file is not
installed.  ``import cli`` gives the same module, for tests and scripts."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ll_codegen import cli as _cli  # noqa: E402

sys.modules[__name__] = _cli          # `import cli` is ll_codegen.cli itself

if __name__ == "__main__":
    _cli.main()
