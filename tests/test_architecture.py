"""The package's layering (ARCHITECTURE.md, "Layers"), checked on the source:

* no import cycle among the package's modules — imports inside functions count, so a cycle
  cannot hide in a deferred import;
* no private name (``_x``) imported from a module of another package;
* the evaluator, the mechanism and Private-PGM reach no method package
  (``mmtoolkit.selectors``), directly or through what they import: they know strategy kinds
  only through the protocol.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import mmtoolkit

ROOT = Path(mmtoolkit.__file__).parent
PKG = "mmtoolkit"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _package(name: str) -> str:
    return name if _is_package(name) else name.rpartition(".")[0]


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _package(importer).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(name: str):
    """``(target module, imported name or None, line)`` for every import of a package module."""
    tree = ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PKG:
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(name, node)
            if source.split(".")[0] != PKG:
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in MODULES:
                    yield sub, None, node.lineno
                else:
                    yield source, alias.name, node.lineno


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _, _ in _imports(m):
            # a module's own ancestors are initialised before it: not an edge of the order
            if target in MODULES and not (m == target or m.startswith(target + ".")):
                graph[m].add(target)
    return graph


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_checker_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_private_name_imported_across_packages():
    bad = []
    for m in MODULES:
        for target, name, line in _imports(m):
            if name and name.startswith("_") and not name.startswith("__"):
                if target in MODULES and _package(target) != _package(m):
                    where = MODULES[m].relative_to(ROOT.parent)
                    bad.append(f"{where}:{line} imports {target}.{name}")
    assert not bad, "\n".join(bad)


def test_evaluator_and_mechanism_reach_no_method_package():
    graph = _graph()
    prefixes = ("mmtoolkit.mechanism", "mmtoolkit.evaluate", "mmtoolkit.pgm")
    starts = [m for m in MODULES if m.startswith(prefixes)]
    for start in starts:
        seen, todo = set(), [start]
        while todo:
            v = todo.pop()
            for w in graph[v]:
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        methods = sorted(w for w in seen if w.startswith("mmtoolkit.selectors"))
        assert not methods, f"{start} reaches {methods}"


# ---------------------------------------------------------------- the noise and its record
#: The module that draws every value of noise added to a measurement, and the exact samplers
#: it calls (which call themselves).
NOISE_MODULES = {"mmtoolkit.measurement", "mmtoolkit.noise"}
#: Calls that draw from a distribution: numpy Generator draws, the exact samplers of
#: mmtoolkit.noise, and the noise streams.
DRAWS = {
    "laplace", "normal", "standard_normal", "standard_exponential", "exponential",
    "discrete_laplace", "discrete_gaussian", "NoiseStream", "DiscreteNoiseStream",
}  # fmt: skip
#: Modules that draw random numbers that are not measurement noise, each with its reason.
NOT_NOISE = {
    "mmtoolkit.linalg.orthobasis": "random probe vectors of the orthonormal-rows check",
    "mmtoolkit.linalg.union": "a random starting point of a small optimisation inside the "
    "two-product solver",
    "mmtoolkit.selectors.baselines.lrm": "the Low-Rank Mechanism's random starts (selection)",
    "mmtoolkit.selectors.hdmm.separate": "a random probe telling which block answers a product",
    "mmtoolkit.testing": "random test vectors comparing two matrices (the conformance kit)",
}


def _draws(name: str) -> list[tuple[str, int]]:
    """``(called name, line)`` of every call in the module whose callee is one of DRAWS."""
    tree = ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if called in DRAWS:
                out.append((called, node.lineno))
    return out


def test_noise_is_drawn_in_one_module():
    """Every draw of noise added to a measurement is in mmtoolkit.measurement (beside the
    exact samplers of mmtoolkit.noise); the random numbers drawn elsewhere are listed in
    NOT_NOISE with their reason (a selector's random starts, probes), none of them noise."""
    assert {c for c, _ in _draws("mmtoolkit.measurement")} >= {
        "standard_normal", "discrete_laplace", "discrete_gaussian", "NoiseStream",
    }  # fmt: skip  (the scan sees the draws where they are)
    bad = []
    for m in sorted(MODULES):
        if m in NOISE_MODULES or m in NOT_NOISE:
            continue
        for called, line in _draws(m):
            bad.append(f"{MODULES[m].relative_to(ROOT.parent)}:{line} calls {called}")
    assert not bad, "noise drawn outside mmtoolkit.measurement:\n" + "\n".join(bad)
    stale = [m for m in NOT_NOISE if m not in MODULES or not _draws(m)]
    assert not stale, f"NOT_NOISE lists modules that draw nothing: {stale}"


def _exported_classes(name: str) -> list[str]:
    """The classes a module defines at top level and lists in its ``__all__``."""
    tree = ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))
    exported = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            exported |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name in exported]


def test_one_measurement_type_is_exported():
    """Noisy measurements have one type, mmtoolkit.measurement.Measurement: no module
    exports another class named like a measurement (re-exporting that one is allowed)."""
    found = sorted(
        f"{m}.{c}" for m in MODULES for c in _exported_classes(m) if "Measure" in c
    )
    assert found == ["mmtoolkit.measurement.Measurement"], found


# ---------------------------------------------------------------- the strategy-kind protocol
#: Basic linear-algebra operations of Matrix: not protocol hooks, though kinds override them.
BASIC = {
    "_matmat", "_rmatmat", "_intermediate_rows", "apply_along", "T", "dense", "trace", "diag",
    "pinv", "rownorm_p", "sensitivity",
}  # fmt: skip
#: At most this many protocol hooks on Matrix: the linear algebra and error (gram,
#: colnorm_p, error_route, gram_route, kron_terms, frobenius_sq, pinv_operator,
#: least_squares, apply_overwrite) and answers_streamed (a product handed over in pieces).
MAX_HOOKS = 10


def _classes() -> dict[str, tuple[str, list[str], set[str]]]:
    """Every class of the package: name -> (module, base names, method names)."""
    out = {}
    for m in MODULES:
        tree = ast.parse(MODULES[m].read_text(), filename=str(MODULES[m]))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in
                         node.bases]  # fmt: skip
                methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                out.setdefault(node.name, (m, bases, methods))
    return out


def _protocol_hooks() -> list[str]:
    """The methods Matrix defines that some strategy kind (a Matrix subclass of the package)
    overrides, minus BASIC and dunder methods."""
    classes = _classes()
    matrix = classes["Matrix"][2]

    def is_kind(name, seen=()):
        if name == "Matrix":
            return True
        if name not in classes or name in seen:
            return False
        return any(is_kind(b, (*seen, name)) for b in classes[name][1])

    overridden = set()
    for name, (_, _, methods) in classes.items():
        if name != "Matrix" and is_kind(name):
            overridden |= methods & matrix
    return sorted(h for h in overridden - BASIC if not h.startswith("__"))


def test_matrix_has_few_protocol_hooks_and_no_release_operation():
    """The algebra's protocol is small; what a release asks of a kind is in the release
    handler table (mmtoolkit.release_handlers), so none of ReleaseHandler's operations is a
    Matrix method (putting one back fails here)."""
    from mmtoolkit.linalg import Matrix
    from mmtoolkit.release_handlers import ReleaseHandler

    hooks = _protocol_hooks()
    assert "pinv_operator" in hooks and "error_route" in hooks  # the scan sees overrides
    assert len(hooks) <= MAX_HOOKS, f"{len(hooks)} protocol hooks on Matrix: {hooks}"
    ops = {n for n in vars(ReleaseHandler) if not n.startswith("_")}
    assert len(ops) >= 7
    back = sorted(n for n in ops if hasattr(Matrix, n))
    assert not back, f"release operations on Matrix (belong to a release handler): {back}"


#: The release layer: drawing noise, measuring, releasing, post-processing measurements.
RELEASE_LAYER = {
    "mmtoolkit.measurement", "mmtoolkit.plan", "mmtoolkit.release_handlers",
    "mmtoolkit.discrete",
    "mmtoolkit.mechanism", "mmtoolkit.dask_release", "mmtoolkit.pgm", "mmtoolkit.releasing",
    "mmtoolkit.release_command",
}  # fmt: skip
#: Modules below it (the algebra and everything it rests on, the evaluator).
BELOW_RELEASE = ("mmtoolkit.linalg", "mmtoolkit.evaluate", "mmtoolkit.privacy",
                 "mmtoolkit.noise", "mmtoolkit.records", "mmtoolkit.domain",
                 "mmtoolkit.strategy", "mmtoolkit.workloads", "mmtoolkit.checks",
                 "mmtoolkit.threads")  # fmt: skip


def test_nothing_below_the_release_layer_imports_it():
    """The algebra, privacy definitions, records and the evaluator import nothing of the
    release layer (any import, also inside a function)."""
    assert RELEASE_LAYER <= set(MODULES)
    below = [m for m in MODULES if m.startswith(BELOW_RELEASE)]
    assert "mmtoolkit.linalg.base" in below
    bad = [
        f"{MODULES[m].relative_to(ROOT.parent)}:{line} imports {target}"
        for m in below
        for target, _, line in _imports(m)
        if target in RELEASE_LAYER
    ]
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------- the privacy object's path
def _privacy_modules(selector: str, params: dict, **release) -> set[str]:
    """The package modules whose frames hold the privacy object ``release["privacy"]`` in
    their locals while ``mmtoolkit.release`` runs, off the selection and the error report.

    How it counts: ``sys.setprofile`` sees every Python call and return during the release;
    at each, the frame's locals are searched for the privacy object itself (identity, not
    equality) and the module of a frame holding it is recorded — except under the selector's
    ``select`` (the profiler is off while it runs: it chooses the strategy), the evaluator
    (``mmtoolkit.evaluate``) and ``standard_errors`` (they report the strategy's error):
    the noise depends on neither. What remains is every module the privacy object enters
    on its way from ``mmtoolkit.release`` to the noise draw, the ledger's charge and the
    summary included."""
    import sys

    from mmtoolkit.selectors.base import get_class

    privacy, seen = release["privacy"], set()

    def reports_error(frame) -> bool:
        while frame is not None:
            mod = frame.f_globals.get("__name__", "")
            if mod.startswith("mmtoolkit.evaluate") or frame.f_code.co_name == "standard_errors":
                return True
            frame = frame.f_back
        return False

    def profile(frame, event, arg):
        if event in ("call", "return"):
            mod = frame.f_globals.get("__name__", "")
            if mod.startswith("mmtoolkit") and mod not in seen:
                if any(v is privacy for v in frame.f_locals.values()) and not reports_error(
                    frame
                ):
                    seen.add(mod)

    class Unprofiled(get_class(selector)):
        def select(self, W, privacy):
            sys.setprofile(None)
            try:
                return super().select(W, privacy)
            finally:
                sys.setprofile(profile)

    sys.setprofile(profile)
    try:
        out = mmtoolkit.release(selector=Unprofiled(**params), **release)
    finally:
        sys.setprofile(None)
    assert np.all(np.isfinite(out.answers))
    return seen


def test_the_privacy_object_enters_at_most_five_modules_on_its_way_to_the_noise(tmp_path):
    """Following the privacy object from ``mmtoolkit.release`` to the noise draw enters at
    most 5 package modules (counted as :func:`_privacy_modules` says), for in-memory
    releases of several strategy kinds, continuous and discrete noise, with a ledger: the
    noise plan (``mmtoolkit.plan``) reads the privacy definition once, and what it hands on
    (the noise streams, a kind's own mechanism) carries a scale, not the definition."""
    from mmtoolkit import records
    from mmtoolkit.ledger import Ledger
    from mmtoolkit.privacy import ZCDP, PureDP

    data = records.synthetic({"a": 4, "b": 3, "c": 5}, 200, seed=0)
    cases = [
        ("identity", ZCDP(0.5), "continuous", {}),
        ("identity", PureDP(1.0), "discrete", {}),
        ("hdmm", PureDP(1.0), "continuous", {"restarts": 1, "seed": 0}),
        ("opt_marginals", ZCDP(0.5), "discrete", {"seed": 0}),
        ("residual_planner", ZCDP(0.5), "continuous", {}),
        ("residual_planner", ZCDP(0.5), "discrete", {}),
    ]
    for k, (selector, privacy, noise, params) in enumerate(cases):
        path = tmp_path / f"ledger{k}.json"
        if isinstance(privacy, ZCDP):
            Ledger.create(path, rho=10.0)
        else:
            Ledger.create(path, epsilon=10.0)
        found = _privacy_modules(
            selector, params, data=data, workload="marginals:k=2", privacy=privacy, seed=1,
            noise=noise, ledger=path, progress=False,
        )  # fmt: skip
        case = f"{selector}, {type(privacy).__name__}, {noise}"
        assert len(found) <= 5, f"{case}: the privacy object enters {sorted(found)}"
        assert "mmtoolkit.plan" in found, case  # the noise is planned from it
