"""The reference with a known cost per bucket: every bucket group's launch sleeps 5 ms, on the backward's
critical path."""

from __future__ import annotations

import time

from reference.bucket_group import BucketGroup
from reference.ddp import DistributedDataParallel
from suites.impls.reference import ReferenceImplementation

DELAY_S = 0.005


class SlowLaunchGroup(BucketGroup):
    def start(self, force_all_reduce: bool = False) -> None:
        if not self.launched:
            time.sleep(DELAY_S)
        super().start(force_all_reduce)


class SlowLaunchDDP(DistributedDataParallel):
    bucket_group_cls = SlowLaunchGroup


class SlowLaunch(ReferenceImplementation):
    name = "slow launch"

    def wrap(self, module, config, group, agreement_group=None, expert_group=None) -> SlowLaunchDDP:
        return SlowLaunchDDP(module, config, group, agreement_group=agreement_group,
                             expert_data_parallel_group=expert_group)


implementation = SlowLaunch()
