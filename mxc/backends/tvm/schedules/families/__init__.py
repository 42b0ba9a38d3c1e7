"""The kernel families, one module each; each imports only ``schedules/base/``.

Which family takes a layer is decided one floor up (``schedules/legalize.py``), and
the families' schedule rules are ordered there too (``schedules/cpu.py``).
"""
