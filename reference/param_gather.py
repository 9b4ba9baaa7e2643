"""The lifecycle of a buffer whose grad memory is also where its params are all-gathered (MXFP8's reuse).

One memory holds two lives: the grads from backward to the optimizer step,
and the params from the staging of the masters to their re-quantization.
Every step of that is a state of a bucket, kept here as data, and a step
taken in the wrong state raises ``BufferStateError`` naming the bucket, its
state and the states it should be in, before any byte is touched:

    holding grads --stage--> staged --gather--> gathering --wait--> gathered --consume--> consumed
          ^                     (a synchronous gather goes to gathered at once)             |
          +------------------------------- backward's first grad ---------------------------+

- staging the masters into a bucket's param view needs the buffer's grads
  read by the optimizer (or zeroed): they share the bytes;
- a gather needs every bucket of its group staged (two optimizers, dense and
  expert, each stage their own buffers first);
- consuming (re-quantizing the gathered values into the params, then zeroing
  that bucket's param bytes and only those) needs the bucket gathered;
- a grad (backward, a hook) needs every bucket of the buffer consumed or
  holding grads: a gathered bucket not consumed would add grads onto params;
- zeroing the buffer needs no bucket staged, gathering or gathered: it would
  wipe params not yet in use (upstream zeroed once only ``bucket.param_data``
  for that reason).

Upstream's shipped bugs of this lifecycle were each one of those steps in the
wrong state: docs/reference.md, "MXFP8 params through the grad buffer".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["holding grads", "staged", "gathering", "gathered", "consumed"]
READY_FOR_GRADS: tuple[State, ...] = ("holding grads", "consumed")


class BufferStateError(RuntimeError):
    """A step of the shared buffer's lifecycle taken in a state that would corrupt params or grads."""


@dataclass
class Lifecycle:
    """The states of one buffer's buckets, and whether its grads are live (written since the last zero, not yet
    read by a step)."""

    name: str
    states: list[State]
    grads_live: bool = False
    settled: bool = True
    """Every bucket holds grads (what backward finds on every hook, checked once)."""

    @classmethod
    def of(cls, name: str, buckets: int) -> "Lifecycle":
        return cls(name, ["holding grads"] * buckets)

    def _require(self, bucket: int, doing: str, allowed: tuple[State, ...]) -> None:
        if self.states[bucket] not in allowed:
            raise BufferStateError(
                f"{self.name}, bucket {bucket}: {doing} while it is {self.states[bucket]}, but should be "
                f"{' or '.join(allowed)}")

    def _move(self, bucket: int, state: State) -> None:
        self.states[bucket] = state
        self.settled = self.settled and state == "holding grads"

    def stage(self, bucket: int) -> None:
        if self.grads_live:
            raise BufferStateError(
                f"{self.name}, bucket {bucket}: staging the masters while the buffer holds grads the optimizer has "
                "not read, but should be after the step read them (or after a zero): they share the bytes")
        self._require(bucket, "staging the masters", ("holding grads", "consumed", "staged"))
        self._move(bucket, "staged")

    def gather(self, bucket: int, asynchronous: bool) -> None:
        self._require(bucket, "gathering its params", ("staged",))
        self._move(bucket, "gathering" if asynchronous else "gathered")

    def waited(self, bucket: int) -> None:
        self._require(bucket, "waiting for its gather", ("gathering",))
        self._move(bucket, "gathered")

    def consume(self, bucket: int) -> None:
        self._require(bucket, "consuming its gathered params", ("gathered",))
        self._move(bucket, "consumed")

    def grad(self, bucket: int) -> None:
        """Backward writes a grad into ``bucket``: every bucket's param bytes must be consumed (they overlap the
        grads of others)."""
        if not self.settled:
            for other in range(len(self.states)):
                self._require(other, f"a grad written into bucket {bucket}", READY_FOR_GRADS)
            for other, state in enumerate(self.states):
                if state != "holding grads":
                    self._move(other, "holding grads")
            self.settled = True
        self.grads_live = True

    def read(self) -> None:
        """The optimizer has read the grads (the step): the bytes may take the params."""
        self.grads_live = False

    def zero(self) -> None:
        for bucket in range(len(self.states)):
            self._require(bucket, "zeroing the buffer", READY_FOR_GRADS)
        for bucket, state in enumerate(self.states):
            if state != "holding grads":
                self._move(bucket, "holding grads")
        self.settled, self.grads_live = True, False
