"""Chains of operations whose in-between layouts are free: ``description`` reads a chain,
``search`` chooses the free layouts with the planner's cost model and plans every step."""
