"""``ranks``, what a test gets: run a check on every rank and get one result per rank.

The same call works in both launch modes; the launcher behind it decides
whether the check runs in this process (torchrun) or in the worker pool.
Either way ranks live on from check to check, so each check starts by letting
the implementation under test undo what earlier checks left in the process
(``from_fresh_state``), as if it ran in a fresh one.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable
from typing import Any, Protocol

from ranks.address import Address, address_of, resolve
from ranks.context import RankContext
from ranks.joining import tensors_on
from ranks.startup import Settings
from ranks.outcome import Outcome, RankCrashWarning, settle
from suites.junit import CRASH_RERUN


class Launcher(Protocol):
    mode: str
    settings: Settings

    def backend(self, world_size: int) -> str: ...

    def on_collected(self, nodeids: list[str]) -> None: ...

    def run(
        self, world_size: int, fn: Callable[..., Any], address: Address, args: tuple, kwargs: dict
    ) -> list[Outcome]: ...

    def close(self) -> None: ...


class Ranks:
    def __init__(self, launcher: Launcher, world_size: int, node: Any = None) -> None:
        self._launcher = launcher
        self._node = node  # the test, whose JUnit properties name each crash rerun
        self._reruns = launcher.settings.crash_reruns if launcher.mode == "plain" else 0
        self.world_size = world_size
        self.mode = launcher.mode
        self.backend = launcher.backend(world_size)
        self.tensors = tensors_on(self.backend, launcher.settings.device)
        """Where the ranks' tensors live: ``"cuda"`` or ``"cpu"``."""

    def run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``fn(ctx, *args, **kwargs)`` on every rank; the test passes only if every rank passes.

        ``fn`` must be a module-level function and its arguments and return
        value picklable. Returns the return values by rank. Any rank's failure
        fails the test with every failing rank's traceback; otherwise any
        rank's skip skips it. Call it the same way on every rank: under
        torchrun the test body itself runs on every rank.
        """
        address = address_of(fn)
        try:
            pickle.dumps((args, kwargs))
        except Exception as exc:
            raise TypeError(
                f"ranks.run: the arguments for {address} should be picklable (every rank gets "
                f"a copy), but: {exc}"
            ) from exc
        def launch() -> list[Outcome]:
            return self._launcher.run(self.world_size, from_fresh_state, address_of(from_fresh_state),
                                      (address, *args), kwargs)

        outcomes = launch()
        for _ in range(self._reruns):
            crashed = [o for o in outcomes if o.signal is not None]
            if not crashed:
                break
            said = crash_rerun(crashed, str(address))
            if self._node is not None:
                self._node.user_properties.append((CRASH_RERUN, said))
            warnings.warn(said, RankCrashWarning, stacklevel=2)
            outcomes = launch()  # the launcher replaced the crashed pool: these ranks are fresh
        return settle(outcomes, str(address))

    def __repr__(self) -> str:
        return f"<ranks: {self.mode} mode, world size {self.world_size}, backend {self.backend}>"


def crash_rerun(crashed: list[Outcome], name: str) -> str:
    """What a crash rerun says: which ranks died of which signal in ``name``, and the frame each died in."""
    def where(detail: str) -> str:
        lines = detail.splitlines()
        after = lines[next((i for i, line in enumerate(lines) if line.startswith("Current thread")), len(lines)):]
        frame = next((line.strip() for line in after if line.strip().startswith("File ")), "")
        return f" ({frame})" if frame else ""
    deaths = "; ".join(f"rank {o.rank} died of {o.signal}{where(o.detail)}" for o in crashed)
    return f"{name}: {deaths}; run again on fresh ranks (--crash-reruns)"


def from_fresh_state(ctx: RankContext, address: Address, /, *args: Any, **kwargs: Any) -> Any:
    """Call the check at ``address`` once the implementation under test has forgotten earlier checks
    (``ResetsProcessState``: module-level state it rebinds and never restores)."""
    from suites.impls import load_implementation
    from suites.impls.protocol import ResetsProcessState

    impl = load_implementation(ctx.impl_spec)
    if isinstance(impl, ResetsProcessState):
        impl.reset_process_state()
    return resolve(address)(ctx, *args, **kwargs)
