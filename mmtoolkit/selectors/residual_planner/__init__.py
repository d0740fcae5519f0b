"""ResidualPlanner and ResidualPlanner+ (He, Xiao, Toksoz, Ding, Zhang, Kifer), one package.

``basis`` (per-attribute residual factors), ``workload`` (attribute sets, subset table),
``plan`` (selection of the noise scales σ²_A and the resulting variances), ``matrix`` (the
selected strategy as a strategy kind: its own error route and release, see
:mod:`mmtoolkit.linalg.base`), ``route`` (the evaluator's route for it), ``measurements``
(measurement, reconstruction, covariances; Algorithms 1-3, 5, 6), ``convex1d`` (the
per-attribute strategy optimiser of ResidualPlanner+), ``selector`` (the registered selectors
``residual_planner`` and ``residual_planner_plus``).
"""

from . import selector  # noqa: F401  (registers the selectors)
