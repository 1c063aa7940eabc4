"""How a run is stopped from outside, and how its result says by what.

`toolkit run` and a campaign's run process turn SIGTERM (and Ctrl-C) into an exception in the
main thread, so the harness stops everything and records the run as `invalid` on its way out.
`Interrupted` carries what stopped it (the operator, a signal, the campaign driver dying), so
the result says so instead of always blaming the operator; such a result is marked
`interrupted`, and a campaign reruns it without counting an attempt (an interruption is not the
run's infrastructure failing).
"""

from __future__ import annotations

import signal


class Interrupted(SystemExit):
    """The run was stopped from outside; `reason` says by what (for the result)."""

    def __init__(self, reason: str, code: int) -> None:
        super().__init__(code)
        self.reason = reason


def interrupted_by(exc: BaseException) -> str:
    """What stopped a run that ended with `exc` (a BaseException that is not an Exception)."""
    if isinstance(exc, Interrupted):
        return exc.reason
    if isinstance(exc, KeyboardInterrupt):
        return "Ctrl-C"
    if isinstance(exc, SystemExit):
        # rich exits this way when the reader of the output goes away (`| head`): say so.
        if isinstance(exc.__context__, BrokenPipeError):
            return "its output was closed: the program reading it (e.g. `| head`) exited"
        return f"the harness exited (SystemExit {exc.code!r})"
    return type(exc).__name__


def raise_interrupted(signum: int, _frame: object) -> None:
    """A signal handler (SIGTERM) that stops the run like Ctrl-C, saying which signal."""
    raise Interrupted(signal.Signals(signum).name, 128 + signum)
