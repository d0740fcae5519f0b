"""Saved plans: a selected strategy with what its release needs, to release from later without
selecting again (``mmtoolkit select ... --save FILE``, ``mmtoolkit release --plan FILE``;
:func:`mmtoolkit.releasing.select_plan`, :func:`save_plan`, :func:`load_plan`).

A plan file is an ``.npz`` archive read with ``allow_pickle=False``: a strict-JSON header
(versions, ``sha256``, workload, domain, privacy, noise and the Strategy) and the arrays.
One generic encoding walks the values, with no code per strategy kind; loading runs no code
from the file, and a plan of another format or package version, with a wrong hash, an
unknown class or a field of the wrong type is refused (:class:`PlanError`).

User guide: docs/guide/release.md (saved plans, the plan file).
"""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import json
import math
import os
import sys
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import __version__, mechanism, records, selectors  # noqa: F401 (selectors: every kind)
from .atomic import write_atomic
from .checks import check_choice, check_mapping, check_str
from .domain import Domain
from .jsonsafe import loads
from .linalg import Matrix
from .privacy import Privacy, from_spec
from .strategy import Strategy

__all__ = ["FORMAT", "FORMAT_VERSION", "PlanError", "SavedPlan", "load_plan", "save_plan"]

FORMAT, FORMAT_VERSION = "mmtoolkit-plan", 1


class PlanError(ValueError):
    """A plan that cannot be saved, or a plan file refused (naming the file and why)."""


@dataclass
class SavedPlan:
    """A selected strategy and the settings of its release (module docstring); made by
    :func:`~mmtoolkit.releasing.select_plan` or :func:`load_plan`, released by
    ``mmtoolkit.release(data, plan=...)``.

    Parameters
    ----------
    strategy : Strategy
        The selected strategy.
    workload : str or Matrix
        The workload released: a SPEC or a Matrix on the domain's cells.
    domain : DomainSpec
        The declared domain (:class:`~mmtoolkit.records.DomainSpec`: attributes, sizes,
        labels, bins) it was selected on; the data released must declare the same.
    privacy : Privacy
        The guarantee of each release.
    noise : str, optional
        ``"continuous"`` or ``"discrete"``; None (default): the release's default (discrete
        in a private release).
    select_for : str or Matrix, optional
        The workload the strategy was selected for, when it is not ``workload``; default
        None.
    source : str, optional
        The file the plan was loaded from or last saved to (messages name it); default
        ``"the plan"``.
    sha256 : str, optional
        That file's content hash (hex); None for a plan never saved.
    """

    strategy: Strategy
    workload: str | Matrix
    domain: records.DomainSpec
    privacy: Privacy
    noise: str | None = None  # None: the release's default (discrete if private)
    select_for: str | Matrix | None = None
    source: str = "the plan"
    sha256: str | None = None

    def check_domain(self, recs: records.Records) -> None:
        """Refuse records whose domain (attributes, sizes, labels, bins) is not the plan's.

        Parameters
        ----------
        recs : Records
            The records to release from (:class:`~mmtoolkit.records.Records`).

        Raises
        ------
        PlanError
            Their declared domain differs from the plan's (the message shows the first
            attribute that differs, as each declares it).
        """
        have = _declaration(records.DomainSpec(recs.domain, recs.bins, {}))
        want = _declaration(self.domain._replace(other={}))
        pairs = itertools.zip_longest(have.items(), want.items())
        a, b = next((p for p in pairs if p[0] != p[1]), (None, None))
        if a != b:
            raise PlanError(
                f"{self.source}: the data's domain is not the plan's: the data declare {a}, the "
                f"plan {b}; select a plan for this domain"
            )

    def refuse(self, **given: object) -> None:
        """Refuse release arguments that the plan fixes (any given: not None or empty).

        Parameters
        ----------
        **given : object
            The release's arguments that a plan fixes, by name (``workload=..., privacy=...``).

        Raises
        ------
        PlanError
            One of them is given (not None, ``{}`` or ``[]``); the message names them.
        """
        fixed = [k for k, v in given.items() if v not in (None, {}, [])]
        if fixed:
            raise PlanError(
                f"{', '.join(fixed)}: fixed by the plan {self.source} (its workload, privacy, "
                "selector, parameters, noise and select_for); drop it, or select a new plan"
            )


#: The type of each field of a :class:`SavedPlan` that a plan file holds (``noise`` is
#: checked by value).
_FIELD_TYPES = {"strategy": (Strategy,), "workload": (str, Matrix),
                "domain": (records.DomainSpec,), "privacy": (Privacy,),
                "select_for": (str, Matrix, type(None))}  # fmt: skip


def _check_fields(plan: SavedPlan, where: str) -> None:
    """Raise :class:`PlanError` (``where``, then the field) for a field of ``plan`` that a
    plan cannot hold: what :func:`save_plan` refuses to write and :func:`load_plan` to read
    (so that every plan saved loads)."""
    for key, kinds in _FIELD_TYPES.items():
        value = getattr(plan, key)
        if not isinstance(value, kinds) or isinstance(value, bool):
            what = " or ".join(k.__name__ for k in kinds)
            raise PlanError(f"{where}plan.{key} must be a {what}, got {type(value).__name__}")
    field = "plan.strategy"
    try:
        plan.strategy.__post_init__()  # the Strategy's own checks: a Matrix, a known inference
        check_str(plan.strategy.selector, "selector")
        check_mapping(plan.strategy.params, "params")
        check_mapping(plan.strategy.metadata, "metadata")
        field = "plan"
        plan.noise is None or check_choice(plan.noise, "noise", mechanism.NOISES)
    except (TypeError, ValueError, AttributeError) as exc:
        raise PlanError(f"{where}{field}: {exc}") from None


def _declaration(spec: records.DomainSpec) -> dict:
    """The domain-file mapping of a DomainSpec (``records.parse_domain`` reads it back)."""
    out = {}
    for name, size, numeric, labels in zip(*_fields(spec.domain)):
        out[name] = {"size": size, "numeric": numeric}
        if name in spec.bins:
            out[name]["bins"] = [float(e) for e in spec.bins[name]]
        elif labels is not None:
            out[name]["values"] = list(labels)
        if name in spec.other:
            out[name]["other"] = spec.other[name]
    return out


def _fields(dom: Domain) -> tuple:
    return dom.names, dom.sizes, dom.numeric, dom.labels


# ============================================================================ encoding
def _class(name, where: str) -> type:
    """The package's class ``module:qualname`` in an imported module (no code runs)."""
    module, _, qualname = str(name).partition(":")
    found = sys.modules.get(module) if module.split(".")[0] == "mmtoolkit" else None
    for part in qualname.split(".") if found is not None else ():
        found = vars(found).get(part) if hasattr(found, "__dict__") else None
    if not (isinstance(found, type) and f"{found.__module__}:{found.__qualname__}" == name):
        raise PlanError(f"{where}: unknown class {name!r} (a plan holds the package's own only)")
    return found


def _encode(value, arrays: dict, where: str, active: set):
    """The JSON form of ``value`` (docs/guide/release.md, "The plan file"); its arrays are
    added to ``arrays``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.generic, np.ndarray)) and value.dtype.kind not in "biuf":
        raise PlanError(f"cannot save {where}: numpy data of dtype {value.dtype}")
    if isinstance(value, np.generic):
        return {"scalar": [value.dtype.str, _encode(value.item(), arrays, where, active)]}
    if isinstance(value, np.ndarray):
        arrays[f"a{len(arrays)}"] = value
        return {"array": f"a{len(arrays) - 1}"}
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, Domain):
        return {"domain": _encode(list(_fields(value)), arrays, where, active)}
    if id(value) in active:
        raise PlanError(f"cannot save {where}: it refers to itself")
    active.add(id(value))
    kind = type(value)
    if kind in (list, tuple, set, frozenset):
        items = [_encode(v, arrays, f"{where}[{i}]", active) for i, v in enumerate(value)]
        out: list | dict = items if kind is list else {kind.__name__: items}
    elif kind is dict:
        out = {"dict": [[_encode(k, arrays, f"{where} key", active),
                         _encode(v, arrays, f"{where}[{k!r}]", active)]
                        for k, v in value.items()]}  # fmt: skip
    elif hasattr(value, "__dict__") and not any(getattr(c, "__slots__", ()) for c in kind.__mro__):
        name = f"{kind.__module__}:{kind.__qualname__}"
        _class(name, f"cannot save {where}")
        cached = {k for c in kind.__mro__ for k, v in vars(c).items()
                  if isinstance(v, functools.cached_property)}  # fmt: skip
        state = {k: _encode(v, arrays, f"{where}.{k}", active)
                 for k, v in vars(value).items() if k not in cached}  # fmt: skip
        out = {"object": [name, state]}
    else:
        raise PlanError(f"cannot save {where}: a {kind.__name__} is not plain data")
    active.discard(id(value))
    return out


def _decode(node, arrays: dict, where: str):
    """The value of the JSON form ``node`` (the inverse of :func:`_encode`)."""
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, arrays, f"{where}[{i}]") for i, v in enumerate(node)]
    body: Any  # the tagged node's content
    tag, body = next(iter(node.items())) if isinstance(node, dict) and len(node) == 1 else ("", 0)
    pair = isinstance(body, list) and len(body) == 2
    try:
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag in ("tuple", "set", "frozenset") and isinstance(body, list):
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](
                _decode(body, arrays, where)
            )
        if tag == "dict" and isinstance(body, list) and all(len(p) == 2 for p in body):
            pairs = [(_decode(k, arrays, where), v) for k, v in body]
            return {k: _decode(v, arrays, f"{where}[{k!r}]") for k, v in pairs}
        if tag == "array" and isinstance(body, str) and body in arrays:
            return arrays[body]
        if tag == "scalar" and pair and np.dtype(body[0]).kind in "biuf":
            return np.dtype(body[0]).type(_decode(body[1], arrays, where))
        if tag == "domain":
            return Domain(*_decode(body, arrays, where))
        if tag == "object" and pair and isinstance(body[1], dict):
            obj: object = object.__new__(_class(body[0], where))
            vars(obj).update({k: _decode(v, arrays, f"{where}.{k}") for k, v in body[1].items()})
            return obj
    except (TypeError, ValueError, KeyError) as exc:
        raise exc if isinstance(exc, PlanError) else PlanError(f"{where}: {exc}") from None
    raise PlanError(f"{where}: not a value of a saved plan ({json.dumps(node)[:80]})")


def _digest(header: dict, arrays: dict) -> str:
    """SHA-256 of the canonical JSON of ``header`` without ``sha256``, then of every array."""
    rest = {k: v for k, v in header.items() if k != "sha256"}
    h = hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\0{name}\0{a.dtype.str}\0{a.shape}\0".encode() + a.tobytes())
    return h.hexdigest()


# ============================================================================ files
def save_plan(path: str | os.PathLike[str], plan: SavedPlan) -> str:
    """Write ``plan`` to ``path`` atomically (module docstring); ``plan.sha256`` and
    ``plan.source`` are set to the file's.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write (an ``.npz`` archive; an existing file is replaced).
    plan : SavedPlan
        The plan.

    Returns
    -------
    str
        The SHA-256 of the file's content (64 hex digits), as :func:`load_plan` checks it.

    Raises
    ------
    PlanError
        Nothing written: ``plan`` is not a SavedPlan; a field of the wrong type or value
        (what :func:`load_plan` would refuse); a value that is not plain data, such as an
        object of a class outside the package (the message names it); the file cannot be
        written.
    """
    if not isinstance(plan, SavedPlan):
        raise PlanError(f"save_plan needs a SavedPlan, got {type(plan).__name__}")
    _check_fields(plan, "cannot save: ")
    arrays: dict = {}
    values = {"workload": plan.workload, "select_for": plan.select_for, "strategy": plan.strategy}
    body = {k: _encode(v, arrays, f"plan.{k}", set()) for k, v in values.items()}
    body.update(domain=_declaration(plan.domain), privacy=plan.privacy.to_spec(),
                noise=plan.noise)  # fmt: skip
    header: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION,
                              "package_version": __version__, "plan": body}  # fmt: skip
    header["sha256"] = _digest(header, arrays)
    buf = io.BytesIO()
    text = json.dumps(header, allow_nan=False, ensure_ascii=False, indent=1).encode()
    np.savez(buf, header=np.frombuffer(text, dtype=np.uint8), **arrays)
    try:
        write_atomic(path, buf.getvalue())
    except OSError as exc:
        raise PlanError(f"cannot write {path}: {exc.strerror or exc}") from None
    plan.source, plan.sha256 = str(path), header["sha256"]
    return plan.sha256


def load_plan(path: str | os.PathLike[str]) -> SavedPlan:
    """The :class:`SavedPlan` in ``path``, every field checked; no code from the file runs.

    Parameters
    ----------
    path : str or os.PathLike
        A file written by :func:`save_plan`.

    Returns
    -------
    SavedPlan
        The plan, with ``source`` = ``str(path)`` and ``sha256`` its content hash.

    Raises
    ------
    PlanError
        The file cannot be read or is not a saved plan; another format or package version;
        content that does not match its sha256 (damaged or edited); a class outside the
        package; a field of the wrong type or value. The message names the file and what is
        wrong.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        raw = arrays.pop("header")
        header = loads(raw.tobytes().decode("utf-8"), f"{path}: header", PlanError)
    except PlanError:
        raise
    except (OSError, ValueError, EOFError, TypeError, KeyError, zipfile.BadZipFile) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else repr(exc)
        raise PlanError(f"cannot read the plan {path}: {why}") from None
    get = header.get if isinstance(header, dict) else {}.get
    if get("format") != FORMAT:
        raise PlanError(f"{path}: not a saved plan (format {get('format')!r})")
    for key, want in (("format_version", FORMAT_VERSION), ("package_version", __version__)):
        if get(key) != want or isinstance(get(key), bool):
            raise PlanError(
                f"{path}: {key} is {get(key)!r}, this mmtoolkit reads {want!r}: a plan holds the "
                "package's internal state, which another version may lay out otherwise; select "
                "again (mmtoolkit select ... --save)"
            )
    if get("sha256") != _digest(header, arrays):
        raise PlanError(f"{path}: the content does not match its sha256: damaged or edited")
    plan_body = get("plan")
    body: dict = plan_body if isinstance(plan_body, dict) else {}

    def field(key):
        try:
            return _decode(body.get(key), arrays, f"plan.{key}")
        except (PlanError, RecursionError) as exc:
            why = exc if isinstance(exc, PlanError) else f"plan.{key} is nested too deeply"
            raise PlanError(f"{path}: {why}") from None

    values = {key: field(key) for key in ("strategy", "workload", "select_for")}
    where = "plan.domain"
    try:
        domain = records.parse_domain(body.get("domain"), where)
        where = "plan.privacy"
        privacy = from_spec(body.get("privacy"))
    except (TypeError, ValueError, AttributeError) as exc:
        raise PlanError(f"{path}: {where}: {exc}") from None
    plan = SavedPlan(domain=domain, privacy=privacy, noise=body.get("noise"), source=str(path),
                     sha256=get("sha256"), **values)  # fmt: skip
    _check_fields(plan, f"{path}: ")
    return plan
