"""Concurrent builds in one process: TVM's Relax ``BlockBuilder`` stack per thread.

``relax.BlockBuilder`` keeps the builders whose function scope is open in a
class attribute, one list for the whole process, and checks on leaving a scope
that the innermost builder is its own.  Two threads lowering or legalizing at
once (two ``mxc.compile`` calls, a serving process compiling models side by
side) push onto the same list, and one fails with a bare ``AssertionError``
("BlockBuilder.current() must be self").  Every other piece of state a build
uses is per build (:mod:`.build_context`) or per thread in TVM itself (the
target and pass contexts), so giving each thread its own stack is what makes
concurrent builds independent.
"""

from __future__ import annotations

import threading


class _PerThreadStack(threading.local):
    """The list operations ``BlockBuilder`` uses on its stack, on a list per thread."""

    def __init__(self) -> None:
        self.items: list = []

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]

    def append(self, builder) -> None:
        self.items.append(builder)

    def pop(self):
        return self.items.pop()


def per_thread_block_builders() -> None:
    """Give ``relax.BlockBuilder`` a stack per thread (idempotent; called where mxc
    creates builders and starts builds)."""
    from tvm import relax
    if not isinstance(relax.BlockBuilder._stack, _PerThreadStack):
        stack = _PerThreadStack()
        stack.items.extend(relax.BlockBuilder._stack)   # this thread's open scopes, if any
        relax.BlockBuilder._stack = stack
