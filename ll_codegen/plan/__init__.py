"""Stage ``plan``: what moves where, as data; imports ``core`` and ``layouts`` only.

* ``model``: the plan dataclasses (``Transfer`` and its parts: shuffle rounds,
  shared-memory rounds, memory accesses, costs), serialisable, nothing planned here;
* ``operations``: the operations (``convert``, ``store``, ``load``, ``copy``, ``gather``),
  each with its plan type and planner -- the keys every later stage dispatches on;
* ``planner``: ``plan_conversion``, ``plan_memory``, ``plan_copy`` and the cost model;
* ``shuffle``: warp-shuffle conversions (paper 000 section 5.4, "warp shuffles");
* ``swizzle``: conversions through shared memory with the optimal swizzle (section 5.4, App. 9.2);
* ``memory``: register <-> shared/global tile accesses and copies (vector widths, sectors);
* ``gather``: ``GatherPlan`` and its planner (section 5.5);
* ``report``: the readable summary of every operation's plan.
"""
