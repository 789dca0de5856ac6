"""The validator's checks, registered in the order they run (static, runtime, semantic, then the server and
resource checks that measure everything before them). They execute inside the sandbox."""

from openadapt.validator.checks import static  # noqa: I001,F401  (imports register checks, in this order)
from openadapt.validator.checks import runtime  # noqa: F401
from openadapt.validator.checks import semantic  # noqa: F401
from openadapt.validator.checks import final  # noqa: F401
from openadapt.validator.checks.base import REGISTRY, Context, run_checks

__all__ = ["REGISTRY", "Context", "run_checks"]
