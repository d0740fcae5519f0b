"""A privacy ledger: the budget spent on one dataset across releases, in a JSON file.

:class:`Ledger` declares a total (``ρ``, ``ε`` or ``(ε, δ)``) and records one entry per
release; :meth:`Ledger.charge` writes a pending entry before any noise is drawn and refuses a
release over the total, :meth:`Ledger.commit` / :meth:`Ledger.cancel` close it, and every
load checks every field (:class:`LedgerError`). :func:`charge_of` is what a release charges.
Composition: zCDP ``ρ`` adds (Bun & Steinke 2016, Lemma 2.3; conversions Prop. 1.4, 1.6);
pure and approximate DP by basic composition (Dwork & Roth 2014, Thm 3.16); zCDP stated as
(ε, δ) by Canonne, Kamath & Steinke 2020 (Cor. 13), Bun & Steinke's Prop. 1.3 beside it.

User guide: docs/guide/ledger.md.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock

from . import jsonsafe
from .atomic import write_atomic
from .checks import (
    check_float,
    check_int,
    check_mapping,
    check_positive,
    check_probability,
    check_str,
)
from .privacy import ZCDP, ApproxDP, Privacy, PureDP, check_privacy, from_spec

__all__ = ["FORMAT", "Ledger", "LedgerError", "Spent", "charge_of"]

FORMAT = "mmtoolkit-ledger/1"
#: Relative slack when comparing spent budget with the total (float rounding of sums), and
#: an entry's recorded charge with the one its privacy gives.
TOLERANCE = 1e-9
#: The fields of a ledger file.
FILE_FIELDS = ("format", "dataset", "created", "total", "conversion_delta", "entries")
#: The fields every entry has, and the optional ones (strings when present).
ENTRY_FIELDS = ("id", "time", "status", "privacy", "privacy_text", "releases", "charge",
                "description")
OPTIONAL_ENTRY_FIELDS = ("committed", "seed_key", "release_key")
#: The status of an entry.
STATUSES = ("pending", "committed")


class LedgerError(ValueError):
    """A ledger that cannot be read, or a charge that does not fit in its budget."""


def charge_of(privacy: Privacy, releases: int = 1) -> dict:
    """What ``releases`` releases under ``privacy`` charge (``R`` = ``releases``).

    Parameters
    ----------
    privacy : Privacy
        The guarantee of each release: ``PureDP``, ``ApproxDP`` or ``ZCDP``.
    releases : int, optional
        The number of releases, at least 1 (default 1).

    Returns
    -------
    dict
        ``{"rho": R·ρ}`` (zCDP), ``{"epsilon": R·ε}`` (pure) or ``{"epsilon": R·ε, "delta":
        R·δ, "rho": R/(2σ²)}`` ((ε, δ): the Gaussian mechanism's σ per unit sensitivity
        gives its zCDP ρ too).

    Raises
    ------
    TypeError
        ``privacy`` is not a PureDP, ApproxDP or ZCDP.
    ValueError
        ``releases`` is not an integer ≥ 1.

    References
    ----------
    Bun & Steinke 2016, zCDP, Lemma 2.3 (ρ adds) and Proposition 1.6 (the Gaussian
    mechanism's ρ); Dwork & Roth 2014, Theorem 3.16 (basic composition).
    """
    check_privacy(privacy)
    r = check_int(releases, "releases", minimum=1)
    if isinstance(privacy, ZCDP):
        return {"rho": r * privacy.rho}
    if isinstance(privacy, PureDP):
        return {"epsilon": r * privacy.epsilon}
    if not isinstance(privacy, ApproxDP):  # a subclass of Privacy of none of the three kinds
        raise TypeError(f"privacy must be a PureDP, ApproxDP or ZCDP instance, got {privacy!r}")
    sigma = privacy.noise_scale(1.0)
    return {"epsilon": r * privacy.epsilon, "delta": r * privacy.delta, "rho": r / (2 * sigma**2)}


@dataclass(frozen=True)
class Spent:
    """Budget spent (pending entries included), per kind of guarantee.

    Parameters
    ----------
    rho : float
        Σ ρ of the zCDP releases.
    epsilon_pure : float
        Σ ε of the pure-DP releases.
    epsilon_approx : float
        Σ ε of the (ε, δ) releases.
    delta_approx : float
        Σ δ of the (ε, δ) releases.
    rho_approx : float
        Σ 1/(2σ²) of the (ε, δ) releases (their zCDP guarantee).
    rho_pure : float
        Σ ε²/2 over the pure-DP releases (their zCDP guarantee, Bun & Steinke 2016,
        Proposition 1.4).
    """

    rho: float  # Σ ρ of the zCDP releases
    epsilon_pure: float  # Σ ε of the pure-DP releases
    epsilon_approx: float  # Σ ε of the (ε, δ) releases
    delta_approx: float  # Σ δ of the (ε, δ) releases
    rho_approx: float  # Σ 1/(2σ²) of the (ε, δ) releases (their zCDP guarantee)
    rho_pure: float  # Σ ε²/2 over the pure-DP releases (their zCDP guarantee, Prop. 1.4)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _zcdp_to_dp(rho: float, delta: float) -> float:
    """ε of ρ-zCDP at ``delta`` by the tightest conversion for any ρ-zCDP mechanism
    (Canonne, Kamath & Steinke 2020, Cor. 13: docs/guide/ledger.md says why not the
    Gaussian's exact curve); 0 for ρ = 0."""
    return ZCDP(rho).to_approx_dp_tight(delta) if rho > 0 else 0.0


def _zcdp_to_dp_prop_1_3(rho: float, delta: float) -> float:
    """ε of ρ-zCDP at ``delta`` by Bun & Steinke 2016, Prop. 1.3 (shown beside the tight one)."""
    return ZCDP(rho).to_approx_dp(delta) if rho > 0 else 0.0


class Ledger:
    """The privacy ledger in the JSON file ``path`` (docs/guide/ledger.md): :meth:`create`
    starts one, ``Ledger(path)`` opens one, :meth:`charge` / :meth:`commit` bracket a
    release, :meth:`remaining`, :meth:`spent` and :meth:`report` read it.

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file (a symbolic link is followed: every path to one file is one ledger).

    Raises
    ------
    LedgerError
        The file does not exist, cannot be read, is not UTF-8 strict JSON, or is not a
        ledger with every field valid (the message names the file and the field).

    References
    ----------
    Bun & Steinke 2016, zCDP, Lemma 2.3 (ρ adds) and Propositions 1.3, 1.4, 1.6;
    Dwork & Roth 2014, Theorem 3.16 (basic composition of ε and of (ε, δ));
    Canonne, Kamath & Steinke 2020, Corollary 13 (ρ-zCDP stated as (ε, δ)).
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._data = self._read()

    # ------------------------------------------------------------------ files
    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        rho: float | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
        conversion_delta: float | None = None,
        dataset: str = "",
    ) -> Ledger:
        """Create a ledger file with a declared total: ``rho`` (zCDP), ``epsilon`` (pure DP)
        or ``epsilon`` and ``delta``. Refuses to overwrite an existing file.

        Parameters
        ----------
        path : str or os.PathLike
            The file to create (it must not exist).
        rho : float, optional
            A zCDP total ρ > 0 (not with ``epsilon`` or ``delta``).
        epsilon : float, optional
            A pure-DP total ε > 0, or the ε of an (ε, δ) total with ``delta``.
        delta : float, optional
            The δ of an (ε, δ) total, in (0, 1).
        conversion_delta : float, optional
            The δ in (0, 1) at which zCDP releases are stated as (ε, δ); default ``delta`` / 2
            for an (ε, δ) total, else 1e-6. Below ``delta``.
        dataset : str, optional
            A name for the dataset, shown by :meth:`report` (default empty).

        Returns
        -------
        Ledger
            The new ledger, with no entries.

        Raises
        ------
        LedgerError
            No total, ``rho`` with ``epsilon`` or ``delta``, ``conversion_delta`` not below
            ``delta``, an existing file, or a lock that cannot be taken.
        ValueError
            A total or ``conversion_delta`` that is not a positive number (a probability
            in (0, 1) for the δs); the message names the field.
        """
        path = Path(path)
        if rho is not None:
            if epsilon is not None or delta is not None:
                raise LedgerError("a ledger total is --rho, or --epsilon [--delta], not both")
            total = {"rho": check_positive(rho, "rho")}
        elif epsilon is not None:
            total = {"epsilon": check_positive(epsilon, "epsilon")}
            if delta is not None:
                total["delta"] = check_probability(delta, "delta")
        else:
            raise LedgerError("a ledger needs a total budget: rho, or epsilon [and delta]")
        if conversion_delta is None:
            conversion_delta = total["delta"] / 2 if "delta" in total else 1e-6
        conversion_delta = check_probability(conversion_delta, "conversion_delta")
        if "delta" in total and conversion_delta >= total["delta"]:
            raise LedgerError(
                f"conversion_delta {conversion_delta:g} must be below the total δ "
                f"{total['delta']:g}"
            )
        data = {"format": FORMAT, "dataset": str(dataset), "created": _now(), "total": total,
                "conversion_delta": conversion_delta, "entries": []}
        target = _target(path)
        with _locked(target):
            if os.path.lexists(path) or target.exists():
                raise LedgerError(f"{path} already exists; a ledger is never overwritten")
            write_atomic(target, _dump(data, path))
        return cls(path)

    def _read(self) -> dict:
        """The ledger file's data, every field checked (docs/guide/ledger.md)."""
        try:
            text = _target(self.path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise LedgerError(
                f"ledger {self.path} does not exist; create it first (mmtoolkit ledger init "
                f"{self.path} --rho R, or Ledger.create)"
            ) from None
        except UnicodeDecodeError:
            raise LedgerError(f"ledger {self.path}: not UTF-8 text") from None
        except OSError as exc:
            raise LedgerError(f"cannot read ledger {self.path}: {exc.strerror}") from None
        data = jsonsafe.loads(text, f"ledger {self.path}", LedgerError)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise LedgerError(f"{self.path}: not a privacy ledger (format {FORMAT} expected)")
        try:
            _check_file(data)
        except ValueError as exc:  # the checks name the field; add the file
            raise LedgerError(f"ledger {self.path}: {exc}") from None
        return data

    # ------------------------------------------------------------------ reading
    @property
    def total(self) -> dict:
        """The declared total: ``{"rho": ρ}``, ``{"epsilon": ε}`` or ``{"epsilon": ε,
        "delta": δ}`` (a copy)."""
        return dict(self._data["total"])

    @property
    def conversion_delta(self) -> float:
        """The δ at which zCDP releases are stated as (ε, δ)."""
        return float(self._data["conversion_delta"])

    @property
    def entries(self) -> list[dict]:
        """The entries as read when the ledger was opened or last written (copies), oldest
        first: one dict per charge (docs/guide/ledger.md lists the fields)."""
        return [dict(e) for e in self._data["entries"]]

    def spent(self, extra: dict | None = None, releases: int = 1) -> Spent:
        """The budget spent by every entry (pending included), plus ``extra``.

        Parameters
        ----------
        extra : dict, optional
            A charge counted as well (:func:`charge_of` of ``releases`` releases); default:
            none.
        releases : int, optional
            The number of releases ``extra`` charges for, at least 1 (default 1).

        Returns
        -------
        Spent
            The sums per kind of guarantee.

        Raises
        ------
        ValueError
            ``extra`` is given and ``releases`` is not an integer ≥ 1.
        """
        charges = [(e["charge"], e["releases"]) for e in self._data["entries"]]
        if extra:
            charges.append((extra, check_int(releases, "releases", minimum=1)))
        rho = eps_p = eps_a = delta_a = rho_a = rho_p = 0.0
        for c, r in charges:
            if "delta" in c:
                eps_a += c["epsilon"]
                delta_a += c["delta"]
                rho_a += c["rho"]
            elif "epsilon" in c:
                eps_p += c["epsilon"]
                rho_p += r * (c["epsilon"] / r) ** 2 / 2  # r releases of ε = c/r each
            else:
                rho += c["rho"]
        return Spent(rho, eps_p, eps_a, delta_a, rho_a, rho_p)

    def usage(self, extra: dict | None = None, releases: int = 1) -> dict:
        """The spent budget in the units of the total, all entries composed.

        Parameters
        ----------
        extra : dict, optional
            A charge counted as well (:func:`charge_of` of ``releases`` releases); default:
            none.
        releases : int, optional
            The number of releases ``extra`` charges for, at least 1 (default 1).

        Returns
        -------
        dict
            ``{"rho": …}`` (zCDP total: the ρ of every release, pure and (ε, δ) ones by
            their zCDP guarantee), ``{"epsilon": …}`` (pure total;
            None when a zCDP or (ε, δ) release cannot be expressed as ε) or ``{"epsilon": …,
            "delta": …}`` ((ε, δ) total: the zCDP releases stated at
            :attr:`conversion_delta`).

        Raises
        ------
        ValueError
            ``extra`` is given and ``releases`` is not an integer ≥ 1.
        """
        s = self.spent(extra, releases)
        total = self._data["total"]
        if "rho" in total:
            return {"rho": s.rho + s.rho_approx + s.rho_pure}
        if "delta" not in total:
            ok = s.rho == 0 and s.epsilon_approx == 0
            return {"epsilon": s.epsilon_pure if ok else None}
        dc = self.conversion_delta
        return {
            "epsilon": s.epsilon_pure + s.epsilon_approx + _zcdp_to_dp(s.rho, dc),
            "delta": s.delta_approx + (dc if s.rho > 0 else 0.0),
        }

    def zcdp_as_approx_dp(self) -> dict:
        """The zCDP releases' ρ (pending entries included) stated as (ε, δ) at the ledger's
        ``conversion_delta``.

        Returns
        -------
        dict
            ``rho`` (their Σ ρ), ``delta`` (:attr:`conversion_delta`), ``epsilon`` by
            Canonne, Kamath & Steinke 2020 (the conversion the ledger uses; 0 for ρ = 0) and
            ``epsilon_prop_1_3`` by Bun & Steinke 2016 (looser).

        References
        ----------
        Canonne, Kamath & Steinke 2020, Corollary 13; Bun & Steinke 2016, Proposition 1.3.
        """
        rho, dc = self.spent().rho, self.conversion_delta
        return {"rho": rho, "delta": dc, "epsilon": _zcdp_to_dp(rho, dc),
                "epsilon_prop_1_3": _zcdp_to_dp_prop_1_3(rho, dc)}  # fmt: skip

    def remaining(self) -> dict:
        """The budget left, in the units of the total.

        Returns
        -------
        dict
            Per key of :attr:`total`: the total minus :meth:`usage` (negative when more than
            the total is spent), or None where the usage cannot be expressed in that unit.
        """
        used = self.usage()
        return {k: (None if used[k] is None else self._data["total"][k] - used[k]) for k in used}

    def report(self) -> str:
        """A human-readable account of the ledger (what ``mmtoolkit ledger show`` prints).

        Returns
        -------
        str
            Lines: the total, the budget spent per kind, the zCDP total as (ε, δ) by both
            conversions (:meth:`zcdp_as_approx_dp`), the use against the total, and one line
            per entry (pending ones marked).
        """
        s = self.spent()
        total = self._data["total"]
        z = self.zcdp_as_approx_dp()
        lines = [
            f"ledger {self.path}"
            + (f" (dataset {self._data['dataset']})" if self._data["dataset"] else ""),
            "total: " + ", ".join(f"{k} = {v:g}" for k, v in total.items()),
            "spent (pending entries included):",
            f"  zCDP releases: rho = {s.rho:.6g}  (rho adds; Bun & Steinke 2016 Lemma 2.3)",
            f"    as (epsilon, delta): epsilon = {z['epsilon']:.6g} at delta = {z['delta']:g}"
            "  (Canonne, Kamath & Steinke 2020 Cor. 13; used against an (epsilon, delta) total)",
            f"      by Bun & Steinke 2016 Prop. 1.3: epsilon = {z['epsilon_prop_1_3']:.6g}"
            "  (rho + 2 sqrt(rho ln(1/delta)), looser)",
            f"  pure-DP releases: epsilon = {s.epsilon_pure:.6g}  (basic composition)",
            f"  (epsilon, delta) releases: epsilon = {s.epsilon_approx:.6g}, delta = "
            f"{s.delta_approx:.6g}  (basic composition)",
        ]
        used, left = self.usage(), self.remaining()
        lines.append(
            "against the total: "
            + ", ".join(
                f"{k} used {used[k]:.6g}, left {left[k]:.6g}"
                if used[k] is not None
                else f"{k}: not expressible"
                for k in used
            )
        )
        lines.append(f"entries ({len(self._data['entries'])}):")
        for e in self._data["entries"]:
            charge = ", ".join(f"{k} = {v:.6g}" for k, v in e["charge"].items())
            state = (
                "committed"
                if e["status"] == "committed"
                else "PENDING: charged, release not confirmed (interrupted?) — counted as spent"
            )
            lines.append(
                f"  #{e['id']} {e['time']} {e['privacy_text']} x{e['releases']}: {charge}; "
                f"{state}; {e['description']}"
            )
        return "\n".join(lines)

    # ------------------------------------------------------------------ writing
    def charge(self, privacy: Privacy, releases: int = 1, description: str = "", *,
               seed_key: str | None = None, release_key: str | None = None) -> int:
        """Check that ``releases`` releases under ``privacy`` fit in the budget left and record
        them as a pending entry (atomically) — call before any noise is drawn.

        Parameters
        ----------
        privacy : Privacy
            The guarantee of each release.
        releases : int, optional
            The number of releases charged, at least 1 (default 1).
        description : str, optional
            What is released, recorded with the entry (default empty).
        seed_key : str, optional
            The seed's fingerprint (:func:`~mmtoolkit.releasing.seed_fingerprint`) of a
            seeded release; given with ``release_key``. Default: none (a private release).
        release_key : str, optional
            The key of everything that defines the release
            (:func:`~mmtoolkit.releasing.release_key`); given with ``seed_key``.

        Returns
        -------
        int
            The id of the pending entry, for :meth:`commit` or :meth:`cancel`.

        Raises
        ------
        LedgerError
            Nothing written: the releases do not fit in the budget left; a release that is
            not ε-DP charged to a pure ε total; ``seed_key`` already charged for another
            ``release_key`` (one seed, one release); the file cannot be read or locked.
        TypeError
            ``privacy`` is not a PureDP, ApproxDP or ZCDP.
        ValueError
            ``releases`` is not an integer ≥ 1, or only one of ``seed_key`` and
            ``release_key`` is given.
        """
        charge = charge_of(privacy, releases)
        if (seed_key is None) != (release_key is None):
            raise ValueError("seed_key and release_key: give both or neither")
        with self._update():
            total = self._data["total"]
            if seed_key is not None:
                for e in self._data["entries"]:
                    if e.get("seed_key") == seed_key and e.get("release_key") != release_key:
                        raise LedgerError(
                            f"refused: ledger {self.path} has charged this seed for another "
                            f"release (entry #{e['id']}: {e['description']}); one seed is for "
                            "one release — a seed reused with other privacy, workload, "
                            "strategy, noise or data would let the two outputs be compared. "
                            "Give another seed, or none; nothing was released or written"
                        )
            if "epsilon" in total and "delta" not in total and "rho" in charge:  # not pure
                what = (
                    "an (ε, δ) release"
                    if "delta" in charge
                    else f"a {type(privacy).__name__} release is not ε-DP and"
                )
                raise LedgerError(
                    f"ledger {self.path} has a pure ε-DP total; {what} cannot be charged to it"
                )
            used = self.usage(charge, releases)
            for k, v in used.items():
                if v > total[k] * (1 + TOLERANCE):
                    before = self.usage()[k]
                    raise LedgerError(
                        f"refused: this release ({privacy.describe().split(':')[0]} x "
                        f"{releases}) would bring {k} to {v:.6g}, over the ledger's total "
                        f"{total[k]:g} (spent so far {before:.6g}, left "
                        f"{total[k] - before:.6g}); nothing was released or written"
                    )
            ids = [e["id"] for e in self._data["entries"]]
            entry: dict = {
                "id": max(ids, default=0) + 1,
                "time": _now(),
                "status": "pending",
                "privacy": privacy.to_spec(),
                "privacy_text": privacy.describe().split(":")[0],
                "releases": releases,
                "charge": charge,
                "description": str(description),
            }
            if seed_key is not None:
                entry.update(seed_key=seed_key, release_key=release_key)
            self._data["entries"].append(entry)
        return entry["id"]

    def cancel(self, entry_id: int) -> None:
        """Remove a pending entry whose release failed *before drawing any noise* (the
        caller's random generator is untouched): nothing was spent. A release that may have
        drawn noise must stay charged.

        Parameters
        ----------
        entry_id : int
            The id :meth:`charge` returned.

        Raises
        ------
        LedgerError
            The ledger has no pending entry ``entry_id`` (a committed one is never removed),
            or the file cannot be read or locked.
        """
        with self._update():
            entries = self._data["entries"]
            keep = [e for e in entries if not (e["id"] == entry_id and e["status"] == "pending")]
            if len(keep) == len(entries):
                raise LedgerError(f"ledger {self.path} has no pending entry {entry_id}")
            self._data["entries"] = keep

    def commit(self, entry_id: int) -> None:
        """Mark a pending entry as committed (its release completed).

        Parameters
        ----------
        entry_id : int
            The id :meth:`charge` returned.

        Raises
        ------
        LedgerError
            The ledger has no entry ``entry_id``, or the file cannot be read or locked.
        """
        with self._update():
            for e in self._data["entries"]:
                if e["id"] == entry_id:
                    e["status"] = "committed"
                    e["committed"] = _now()
                    break
            else:
                raise LedgerError(f"ledger {self.path} has no entry {entry_id}")

    @contextmanager
    def _update(self):
        """One read-modify-write under the lock: the file re-read into ``self._data``, written
        back atomically (to the file the path leads to) when the block ends without error."""
        target = _target(self.path)
        with _locked(target):
            self._data = self._read()
            yield
            write_atomic(target, _dump(self._data, self.path))


def _dump(data: dict, path) -> str:
    return jsonsafe.dumps(data, f"ledger {path}", LedgerError, indent=2, ensure_ascii=False) + "\n"


def _target(path) -> Path:
    """The file ``path`` leads to, symbolic links resolved (also a link to a file that does not
    exist yet): the one file that is read, locked and written for every path to a ledger."""
    return Path(os.path.realpath(path))


def _check_file(data: dict) -> None:
    """Check a ledger's fields (``format`` already checked); a ValueError names the field."""
    extra = sorted(str(k) for k in data if k not in FILE_FIELDS)
    if extra:
        raise ValueError(f"unknown field(s) {extra} (a ledger has {list(FILE_FIELDS)})")
    missing = [k for k in FILE_FIELDS if k not in data]
    if missing:
        raise ValueError(f"missing field(s) {missing}")
    check_str(data["dataset"], "dataset", nonempty=False)
    check_str(data["created"], "created", nonempty=False)
    total = check_mapping(data["total"], "total")
    if set(total) not in ({"rho"}, {"epsilon"}, {"epsilon", "delta"}):
        raise ValueError(
            f"total: {dict(total)!r} is not a total budget ({{rho}}, {{epsilon}} or "
            "{epsilon, delta})"
        )
    for key, value in total.items():
        if key == "delta":
            check_probability(value, "total.delta")
        else:
            check_positive(value, f"total.{key}")
    dc = check_probability(data["conversion_delta"], "conversion_delta")
    if "delta" in total and dc >= total["delta"]:
        raise ValueError(f"conversion_delta {dc:g} must be below total.delta {total['delta']:g}")
    entries = data["entries"]
    if not isinstance(entries, list):
        raise ValueError(f"entries: expected a list, got {type(entries).__name__}")
    ids = set()
    for k, entry in enumerate(entries, start=1):
        where = f"entry {k}"
        if isinstance(entry, dict) and "id" in entry:
            where += f" (id {entry['id']!r})"
        try:
            _check_entry(entry)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if entry["id"] in ids:
            raise ValueError(f"{where}: id: {entry['id']} is the id of an earlier entry")
        ids.add(entry["id"])


def _check_entry(entry) -> None:
    """Check one entry; its charge must be what its privacy and releases charge."""
    check_mapping(entry, "")
    missing = [k for k in ENTRY_FIELDS if k not in entry]
    if missing:
        raise ValueError(f"missing field(s) {missing}")
    extra = sorted(k for k in entry if k not in ENTRY_FIELDS + OPTIONAL_ENTRY_FIELDS)
    if extra:
        raise ValueError(
            f"unknown field(s) {extra} (an entry has {list(ENTRY_FIELDS)}, and optionally "
            f"{list(OPTIONAL_ENTRY_FIELDS)})"
        )
    check_int(entry["id"], "id", minimum=1)
    if entry["status"] not in STATUSES:
        raise ValueError(f"status: {entry['status']!r} is not one of {list(STATUSES)}")
    for key in ("time", "privacy_text", "description", *OPTIONAL_ENTRY_FIELDS):
        if key in entry:
            check_str(entry[key], key, nonempty=False)
    releases = check_int(entry["releases"], "releases", minimum=1)
    try:
        privacy = from_spec(entry["privacy"])
    except (ValueError, TypeError) as exc:
        raise ValueError(f"privacy: {exc}") from None
    expected = charge_of(privacy, releases)
    charge = check_mapping(entry["charge"], "charge")
    if set(charge) != set(expected):
        raise ValueError(
            f"charge: has {sorted(charge)}, but a {privacy.to_spec()['kind']} release charges "
            f"{sorted(expected)}"
        )
    for key, want in expected.items():
        got = check_float(charge[key], f"charge.{key}", finite=True)
        if not math.isclose(got, want, rel_tol=TOLERANCE, abs_tol=0.0):
            raise ValueError(
                f"charge.{key}: {charge[key]!r} is not what its privacy "
                f"({privacy.describe().split(':')[0]}) x {releases} charges ({want!r})"
            )


@contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path.lock`` for one read-modify-write (``path``: the resolved
    file, :func:`_target`, so that every path to one ledger takes the same lock). The lock is
    the ``filelock`` package's: ``flock`` on POSIX, ``msvcrt`` locking on Windows; it waits
    as long as another process holds it."""
    name = path.with_name(path.name + ".lock")
    lock = FileLock(name)
    try:
        lock.acquire()
    except OSError as exc:  # the lock file cannot be created or opened
        raise LedgerError(f"cannot lock ledger {path}: {exc.strerror or exc} ({name})") from None
    try:
        yield
    finally:
        lock.release()
