"""A broken planner that lays params out in forward order: the order test must catch it."""

from reference.layout import ParamSpec, plan_layout
from suites.impls.reference import ReferenceImplementation


class ForwardOrder(ReferenceImplementation):
    name = "forward-order-fake"

    def plan(self, named_params, config):
        specs = [ParamSpec.from_parameter(n, p) for n, p in named_params]
        return plan_layout(list(reversed(specs)), config).buffers


implementation = ForwardOrder()
