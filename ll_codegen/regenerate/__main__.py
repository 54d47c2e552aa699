"""``python -m ll_codegen.regenerate ARGS``: exactly ``llgen regenerate ARGS``."""
import sys

from ll_codegen.cli import main

main(["regenerate", *sys.argv[1:]], prog_name="llgen")
