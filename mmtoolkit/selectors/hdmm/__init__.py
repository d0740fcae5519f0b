"""HDMM (McKenna, Miklau, Hay, Machanavajjhala, PVLDB 2018): OPT_0, OPT_⊗, OPT_+, OPT_M and
OPT_HDMM, registered as ``opt0``, ``opt_kron``, ``opt_union``, ``opt_marginals``, ``hdmm``."""

from . import hdmm, kron, opt0, opt_marginals, union  # noqa: F401  (registers the selectors)
