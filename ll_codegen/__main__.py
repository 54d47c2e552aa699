"""``python -m ll_codegen ...``: the ``llgen`` command line."""
from ll_codegen.cli import main

main(prog_name="llgen")
