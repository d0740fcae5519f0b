"""ResidualPlanner and ResidualPlanner+ (He, Xiao, Toksoz, Ding, Zhang, Kifer).

``basis`` (per-attribute residual factors), ``workload`` (attribute sets, subset table),
``plan`` (selection of the noise scales σ²_A and the resulting variances), ``matrix`` (the
selected strategy as a Matrix the shared evaluator can score), ``mechanism`` (measurement,
reconstruction, covariances; Algorithms 1-3, 5, 6), ``convex1d`` (the per-attribute strategy
optimiser of ResidualPlanner+).
"""
