"""The kernel family a legalization chose, carried on the kernel as data.

Legalization (:mod:`..legalize`, consulting :mod:`..kernel_choice`) picks one kernel
family per layer and builds that family's kernel; the family's name is written on
the block its schedule rule works on (the *anchor* block: the accumulating
dot-product block, a Winograd transform) as the block annotation
:data:`FAMILY_ATTR`.  The schedule rules (:mod:`..cpu`) read it back: a family's rule
applies to a kernel exactly when an anchor block says that family.  A block's name is
a label for people and dumps, not a decision: renaming it changes nothing, and a
kernel without the annotation is left to the generic rules.

Why an annotation and not a record in the build context keyed by the kernel's name:
the annotation travels with the TIR -- through FuseOps (a fused function keeps its
blocks' annotations), into MetaSchedule's tuning workers (which replay the default
schedule on the function alone, with no build context of the compile) and into tuning
records -- as TVM's own ``schedule_rule`` block attribute does for MetaSchedule's
custom rules.  A kernel's name changes under fusion and deduplication; its blocks'
annotations do not.  The cost: the annotation is part of the function's structural
hash, so tuning records of these kernels made before it existed do not match them
(they are tuned again).  Block annotations that are not ``pragma_`` keys are dropped
when the TIR is lowered, so the generated code is the same with or without them.

It lives in ``base/`` because every family stamps it and every rule reads it; the
names themselves belong to the families (each module's ``FAMILY``).
"""

from __future__ import annotations

from typing import NamedTuple

#: the anchor block's annotation naming its kernel family (``"bf16_amx"``, ``"int8"`` ...)
FAMILY_ATTR = "mxc.kernel_family"
#: a block's part within its kernel, where a rule must find more than the anchor: the
#: Winograd transforms (``"input"``, ``"rows"``, ``"output"``, ``"weight"``) and the
#: dot-product kernels' padding copy (``"pad"``, :data:`PAD`, which the rule keeps)
PART_ATTR = "mxc.kernel_part"
#: the part of a dot-product kernel's padding (and rounding, phase-splitting) copy
PAD = "pad"


class Choice(NamedTuple):
    """One family's kernel for a layer, as one family hands it to another to build (the
    AMX families' tile kernels, built by the int8 and bf16 families)."""
    family: str     #: what the kernel's anchor block is stamped with
    block: str      #: the anchor block's (and the kernel's) name: a label only


def stamp(family: str, part: str | None = None, **more) -> dict:
    """The ``attrs`` of a ``te.compute`` that makes it *family*'s anchor block (and its
    *part*, and any family-specific annotations *more*: the int8 dot-product step)."""
    attrs = {FAMILY_ATTR: family, **more}
    if part is not None:
        attrs[PART_ATTR] = part
    return attrs


def part(name: str) -> dict:
    """The ``attrs`` of a ``te.compute`` that is part *name* of a kernel, not its anchor
    (the dot-product kernels' padding copy, :data:`PAD`)."""
    return {PART_ATTR: name}


def part_blocks(sch, name: str) -> list:
    """The root-level blocks of *sch* that are part *name* of the kernel (any family)."""
    root = sch.get_sblock("root")
    return [b for b in sch.get_child_blocks(root) if block_part(sch.get(b)) == name]


def block_family(block) -> str:
    """The family an ``SBlock`` is stamped with ("" if none)."""
    return str(block.annotations.get(FAMILY_ATTR, ""))


def block_part(block) -> str:
    """The part an ``SBlock`` is stamped with ("" if none)."""
    return str(block.annotations.get(PART_ATTR, ""))


def family_blocks(sch, family: str, part: str | None = None) -> list:
    """The root-level blocks of *sch* stamped with *family* (and *part*, when given), in
    order."""
    root = sch.get_sblock("root")
    return [b for b in sch.get_child_blocks(root)
            if block_family(sch.get(b)) == family
            and (part is None or block_part(sch.get(b)) == part)]


def family_block(sch, family: str, part: str | None = None):
    """The one root-level block of *sch* stamped with *family* (and *part*); None where
    there is none, or more than one."""
    found = family_blocks(sch, family, part)
    return found[0] if len(found) == 1 else None


def kernel_families(func) -> frozenset:
    """The families stamped on *func*'s root-level blocks (empty: no family chose it)."""
    from tvm import s_tir
    sch = s_tir.Schedule(func)
    root = sch.get_sblock("root")
    return frozenset(f for f in (block_family(sch.get(b)) for b in sch.get_child_blocks(root))
                     if f)
