"""Models ``f(x, theta)`` with analytic Jacobians/Hessians and their local SGD theory.

Paper 000, Appendix A (Eqs. 79-81) applied to any smooth network: :mod:`.base` (interface and
conventions), :mod:`.networks` (built-in models), :mod:`.theory` (theory at a minimum).
"""

from weightdyn.models.base import Model
from weightdyn.models.networks import ACTIVATIONS, DeepLinear, Linear, OneHidden

__all__ = ["ACTIVATIONS", "DeepLinear", "Linear", "Model", "OneHidden"]
