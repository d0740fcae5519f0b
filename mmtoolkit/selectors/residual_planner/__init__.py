"""ResidualPlanner and ResidualPlanner+ (He, Xiao, Toksoz, Ding, Zhang, Kifer), one package;
importing it registers ``residual_planner`` and ``residual_planner_plus``.
User guide: docs/algorithms/residual-planner.md (the modules and what each holds).
"""

from . import selector  # noqa: F401  (registers the selectors)
