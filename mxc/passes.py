"""``mxc.passes``: graph passes, pipelines and pattern rewrites.

::

    import mxc

    @mxc.register_pass("drop-copies")
    def drop_copies(graph, ctx):
        '''Remove _copy nodes.'''
        mxc.rewrite(ctx, mxc.passes.is_op("_copy"), lambda m: m.root.node.inputs[0])

    sym, args, aux = mxc.passes.run(sym, "remove-dropout,fold-batchnorm,drop-copies,dce",
                                    args, aux)

Everything here is re-exported from :mod:`mxc.compiler.passes`; see
``docs/writing-a-pass.md``.
"""

from .compiler.passes import *  # noqa: F401,F403
from .compiler.passes import __all__  # noqa: F401
