"""ll_codegen: layout conversions for CUDA/HIP from linear layouts over F2."""
from .layout import LinearLayout, divide_left, divide_right, identity_nd

__all__ = ["LinearLayout", "divide_left", "divide_right", "identity_nd"]
