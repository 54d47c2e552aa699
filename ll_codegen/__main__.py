"""``python -m ll_codegen ...``: the ``llgen`` command line."""
from .cli import main

main(prog_name="llgen")
