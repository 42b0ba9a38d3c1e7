"""Shared machinery of the CPU kernels: no module here imports a kernel family or a rule.

What more than one kernel family uses lives here (see ``schedules/__init__.py``), so
that a family never imports another to reuse a piece of it.
"""
