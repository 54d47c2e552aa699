"""``python -m ll_codegen.cli``: the same as ``llgen``."""
from ll_codegen.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
