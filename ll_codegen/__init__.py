"""ll_codegen: layout conversions for CUDA/HIP from linear layouts over F2.

``plan_conversion(src, dst, dtype=..., target=..., ...)`` takes LinearLayouts,
spec mappings or spec paths and returns the plan of the operation between them
(``ConvertPlan``, ``StorePlan``, ``LoadPlan``, ``CopyPlan`` or ``TmaPlan``) with
``summary()``, ``to_json()``, ``render(kind, name)`` and ``write(dir, name, emit)``;
``OPERATIONS`` is the registry of every operation."""
__version__ = "0.2.0"

from ll_codegen.core.layout import LinearLayout, divide_left, divide_right, identity_nd
from ll_codegen.spec import SpecError, load_spec, spec_from_dict
from ll_codegen.plan.plans import ConvertPlan, CopyPlan, LoadPlan, StorePlan, Transfer
from ll_codegen.plan.tma import TmaPlan
from ll_codegen.api import plan_conversion
from ll_codegen.operations import OPERATIONS

__all__ = ["LinearLayout", "divide_left", "divide_right", "identity_nd", "SpecError", "load_spec",
           "spec_from_dict", "Transfer", "ConvertPlan", "StorePlan", "LoadPlan", "CopyPlan", "TmaPlan",
           "OPERATIONS", "plan_conversion"]
