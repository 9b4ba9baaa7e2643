"""The reference with the smallest bug of each kind a bound of the single-process oracle must still catch.

Each is off by one rounding, or one element: ``bf16_sum`` rounds the fp32 sum
of a bucket's microbatch grads to bf16 once before reducing it (grads
reduced in fp32 but for that; one bf16 microbatch grad is a bf16 value
already, so it shows from two microbatches on); ``bf16_norm`` takes the norm of fp32 grads cast to bf16;
``zero_counted_twice`` counts one zero element too many; ``bf16_clip``
rounds the clip coefficient to bf16; ``fp8_code_off`` holds one element of
a per-tensor FP8 weight at the next E4M3 code after each gather.
"""

import torch

from fixtures.broken.base import Broken
from reference.bucket_group import BucketGroup
from reference.buffer import ParamAndGradBuffer
from reference.clip import clip_coefficient
from reference.ddp import DistributedDataParallel
from reference.optimizer import ReferenceOptimizer
from reference.quantize import TENSOR


class RoundedOnceGroup(BucketGroup):
    def start(self, force_all_reduce: bool = False) -> None:
        if not self.launched:
            for m in self.members:
                m.bucket.grad_data.copy_(m.bucket.grad_data.to(torch.bfloat16))
        super().start(force_all_reduce)


class Bf16Sum(Broken):
    ddp_cls = type("RoundedOnceDDP", (DistributedDataParallel,), {"bucket_group_cls": RoundedOnceGroup})


class Bf16NormOptimizer(ReferenceOptimizer):
    def grads_for_norm(self):
        return [g.to(torch.bfloat16) for g in super().grads_for_norm()]


class Bf16Norm(Broken):
    optimizer_cls = Bf16NormOptimizer


class ZeroCountedTwiceOptimizer(ReferenceOptimizer):
    def count_zeros(self) -> int:
        return super().count_zeros() + 1


class ZeroCountedTwice(Broken):
    optimizer_cls = ZeroCountedTwiceOptimizer


class Bf16ClipOptimizer(ReferenceOptimizer):
    def step(self):
        import reference.optimizer as module

        exact = module.clip_by_total_norm

        def rounded(grads, max_norm, total_norm):
            coefficient = float(torch.tensor(clip_coefficient(max_norm, total_norm)).to(torch.bfloat16))
            if coefficient < 1.0:
                for g in grads:
                    g.mul_(coefficient)

        module.clip_by_total_norm = rounded
        try:
            return super().step()
        finally:
            module.clip_by_total_norm = exact


class Bf16Clip(Broken):
    optimizer_cls = Bf16ClipOptimizer


class CodeOffBuffer(ParamAndGradBuffer):
    def consume(self, bucket_id: int) -> None:
        super().consume(bucket_id)
        if self.layout.recipe != TENSOR:
            return
        for name in self.buckets[bucket_id].param_names:
            if name == "fc1.weight":
                param = self.params[name]
                param.fp8.data.view(-1)[0] += 1  # the next code away from zero
                param.data.copy_(self.dequantized(param))


class Fp8CodeOff(Broken):
    buffer_cls = CodeOffBuffer


bf16_sum, bf16_norm, zero_counted_twice, bf16_clip = Bf16Sum(), Bf16Norm(), ZeroCountedTwice(), Bf16Clip()
fp8_code_off = Fp8CodeOff()
