"""The compiler: IR, operator registry, inference, passes and partitioning.

Importing this package connects the IR's graph to the layers built on it: the
text form, the verifier and inference (which needs the operator registry).
:mod:`.ir.graph` never imports them -- they import it -- so ``str(graph)``,
``graph.verify()`` and ``graph.types()`` call what is connected here.  Python
runs this file before any module under ``mxc.compiler``, so every graph sees
them connected.
"""

from .infer import infer_fresh as _infer_fresh, question as _question
from .ir.graph import connect_layers as _connect_layers
from .ir.text_printer import print_graph as _print_graph
from .ir.verify import verify_graph as _verify_graph

_connect_layers(print_graph=_print_graph, verify_graph=_verify_graph, question=_question,
                infer=_infer_fresh)
