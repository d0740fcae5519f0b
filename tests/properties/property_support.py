"""What the property suite shares: its Hypothesis profile, the per-example guards, and the
one property every input layer keeps.

**The property.** Every input either works or is refused with one of the package's
documented error types — ``ValueError`` and its subclasses (``RecordsError``,
``SpecError``, ``LedgerError``, ``ReleaseError``, ``NotApplicableError``,
``TooLargeError``, ``UnsupportedWorkloadError``, ...) — carrying a non-empty message; never
another exception type (a ``KeyError``, ``TypeError``, ``MemoryError``, ...), never a
non-finite number in an output, never a changed input file, never a hang.
:func:`outcome` runs one call under the guards and sorts its result into "worked" or
"refused", failing the example on anything else.

**The guards.** :func:`guarded` bounds one example's wall-clock time (``SIGALRM`` through
``setitimer``: a Python-level loop is interrupted; a single C call is interrupted when it
returns) and its address space (``RLIMIT_AS`` set to what the process maps now plus a
headroom, so an input that makes the package allocate gigabytes fails at once with a
``MemoryError`` instead of slowing the machine). Hypothesis' own ``deadline`` only reports a
slow example after it has finished, so it cannot stop a hang; the profile leaves it off and
the guard is the bound.

**The profile.** ``derandomize=True`` (the same examples on every run, so CI is
reproducible), ``database=None`` (nothing written into the repository), example counts kept
small so that the whole suite runs in well under a minute on two cores.
``MMTOOLKIT_PROPERTY_SCALE=10`` multiplies every test's example count for a thorough local
run (still derandomized: a larger scale explores further along the same sequence).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import resource
import signal
from pathlib import Path

from hypothesis import HealthCheck, settings

from mmtoolkit.linalg import kernels

PROFILE = "mmtoolkit-properties"
settings.register_profile(
    PROFILE,
    derandomize=True,
    database=None,
    deadline=None,  # the guard bounds each example; see the module docstring
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow],
)

#: Multiplier of every test's example count (environment variable, default 1).
SCALE = float(os.environ.get("MMTOOLKIT_PROPERTY_SCALE", "1"))


def profile(max_examples: int) -> settings:
    """The suite's settings with ``max_examples`` (times :data:`SCALE`)."""
    return settings(settings.get_profile(PROFILE), max_examples=max(1, round(max_examples * SCALE)))


#: Wall-clock bound of one call in an example (seconds). Every input of the suite is tiny
#: (the slowest legitimate call, a selection on a 4-cell workload, takes well under a
#: second), so a call past this bound is a hang, not a slow machine.
SECONDS = 20.0
#: Address space one call may add to the process (bytes). The tiny inputs need a few MiB.
HEADROOM = 1 << 30


class _Overrun(BaseException):
    """Raised by the alarm inside the guarded call (a BaseException, so that no ``except
    Exception`` of the code under test swallows it)."""


def _mapped_bytes() -> int | None:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmSize:\s+(\d+)\s+kB", status, re.M)
    return int(found.group(1)) * 1024 if found else None


@contextlib.contextmanager
def guarded(seconds: float = SECONDS, headroom: int = HEADROOM):
    """Run the body with at most ``seconds`` of wall-clock time and ``headroom`` more bytes
    of address space (Linux; elsewhere the time bound only). Past the time bound the body
    is interrupted and the example fails as a hang."""

    # compiled kernels (the fast extra) are compiled before the clock starts: the first
    # call that needs one would otherwise spend seconds compiling inside the bound
    kernels.prepare()

    def alarm(signum, frame):
        raise _Overrun

    old_handler = signal.signal(signal.SIGALRM, alarm)
    old_limit = resource.getrlimit(resource.RLIMIT_AS)
    mapped = _mapped_bytes()
    if mapped is not None:
        cap = mapped + headroom
        hard = old_limit[1]
        if hard == resource.RLIM_INFINITY or cap < hard:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Overrun:
        raise AssertionError(f"hang: the call ran for more than {seconds:g} s") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        resource.setrlimit(resource.RLIMIT_AS, old_limit)


def check_refusal(exc: BaseException, *names: str) -> None:
    """``exc`` is a documented refusal: a ``ValueError`` with a non-empty message naming
    each of ``names`` (a file name, a field)."""
    if not isinstance(exc, ValueError):
        raise AssertionError(
            f"{type(exc).__name__} is not one of the package's documented error types "
            f"(ValueError and its subclasses): {exc!r}"
        ) from exc
    message = str(exc)
    assert message.strip(), f"{type(exc).__name__} with an empty message"
    for name in names:
        assert name in message, f"the message does not name {name!r}: {message!r}"


def outcome(
    fn, *args, refusals=(ValueError,), names=(), seconds=SECONDS, headroom=HEADROOM, **kwargs
):
    """``(value, None)`` when ``fn(*args, **kwargs)`` works, ``(None, exc)`` when it is
    refused with one of ``refusals`` (checked by :func:`check_refusal`: a non-empty message
    naming ``names``); any other exception, a hang or an allocation past the headroom fails
    the example."""
    with guarded(seconds, headroom):
        try:
            return fn(*args, **kwargs), None
        except refusals as exc:
            if isinstance(exc, ValueError):
                check_refusal(exc, *names)
            else:  # a non-ValueError refusal allowed by the caller (NotImplementedError)
                assert str(exc).strip(), f"{type(exc).__name__} with an empty message"
            return None, exc
        except Exception as exc:  # noqa: BLE001 - every other type is the failure
            raise AssertionError(
                f"{type(exc).__name__} escaped (not a documented error type): {exc!r}"
            ) from exc


# --------------------------------------------------------------------------- outputs
_NON_FINITE = re.compile(r"(?<![A-Za-z])(nan|inf|infinity)(?![A-Za-z])", re.IGNORECASE)


def non_finite_words(text: str) -> list[str]:
    """The words of ``text`` that spell a non-finite number (``nan``, ``inf``, ``-Infinity``;
    not ``information``)."""
    return _NON_FINITE.findall(text)


class NotStrictJSON(ValueError):
    """A document that is not strict JSON (a duplicate key, NaN or Infinity)."""


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup is not None:
        raise NotStrictJSON(f"duplicate key {dup!r}")
    return dict(pairs)


def _no_constant(name):
    raise NotStrictJSON(f"non-standard constant {name}")


def strict_json(text: str):
    """``text`` parsed as strict JSON (RFC 8259: no NaN / Infinity, no key twice in an
    object); raises :class:`NotStrictJSON` or ``json.JSONDecodeError``."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


def finite_numbers(value, where: str = "") -> None:
    """Every number inside the parsed JSON ``value`` is finite."""
    if isinstance(value, dict):
        for k, v in value.items():
            finite_numbers(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            finite_numbers(v, f"{where}[{i}]")
    elif isinstance(value, float):
        assert math.isfinite(value), f"non-finite number {value!r} at {where or 'top level'}"


# --------------------------------------------------------------------------- files
def snapshot(directory: Path, skip=(".lock",)) -> dict:
    """``{relative path: sha256}`` of every file under ``directory`` (lock files skipped:
    taking a lock is not writing)."""
    out = {}
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file() and not path.name.endswith(skip):
            out[str(path.relative_to(directory))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def changed(before: dict, after: dict) -> dict:
    """The files of two :func:`snapshot` s that were added, removed or modified."""
    keys = set(before) | set(after)
    return {k: (before.get(k), after.get(k)) for k in sorted(keys) if before.get(k) != after.get(k)}


@contextlib.contextmanager
def captured():
    """``(stdout, stderr)``: StringIO objects receiving what is printed in the body."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err
