"""MXNet symbol JSON <-> mxc :class:`~mxc.compiler.ir.Graph`.

Reading (:func:`load_json`, :func:`load_json_file`, :func:`graph_from_dict`)
accepts every dialect MXNet 1.x loads:

* node attributes under ``attrs`` (1.x), ``attr`` (0.9-era) or ``param``
  (0.8-era op parameters; ``attr``/``attrs`` win on a clash, as in nnvm);
* input entries as ``[node, index, version]`` triples or older
  ``[node, index]`` pairs (version 0);
* ``backward_source_id`` (dropped), ``control_deps``, nested ``subgraphs``
  (each a full symbol JSON object, loaded recursively into
  :attr:`Node.subgraphs`), top-level ``arg_nodes``, ``node_row_ptr``,
  ``heads`` and ``attrs`` (``{"mxnet_version": ["int", 10901]}``);
* the version-gated upgrades of :mod:`mxc.frontend.legacy` (hidden keys,
  pre-0.9 BatchNorm aux inputs, initializer defaults, argmin/argmax axis).

Everything is validated with located errors (:class:`SymbolJSONError`, a
:class:`~mxc.errors.ParseError`): ``model.json:12:5: node 3 ('conv0'): field
'inputs' must be a list of [node, index, version] triples``.  Unknown
operators are *not* errors here (``registry.check_supported`` reports them
all at once); registered ones are asked for their output count to check
entry indices.  Hidden attributes are kept verbatim in ``node.attrs``.

Nodes that no head depends on are dropped, as MXNet drops them (a symbol is
its outputs).  ``graph.attrs`` keeps the file's top-level ``attrs`` verbatim
(``graph.attrs["mxnet_version"] == ["int", 10901]``); a file from an older
MXNet is upgraded and then carries the current version.

Writing (:func:`dump_json`, :func:`graph_to_dict`) lives in
:mod:`mxc.frontend.symbol_json_writer` and is re-exported here, so this module
stays the one entry point for symbol JSON in both directions.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from ..compiler.ir.graph import MAX_SUBGRAPH_DEPTH, Graph, post_order, subgraph_depth
from ..compiler.ir.node import Entry, Node, mark_repeated_names
from ..errors import FrontendError, ParseError
from .json_parser import SourceText, describe_type, parse_json, plain
from .legacy import LEGACY_VERSION, MXNET_VERSION, upgrade_graph
from .symbol_json_writer import dump_json, graph_to_dict, mxnet_version

__all__ = ["load_json", "load_json_file", "dump_json", "graph_from_dict", "graph_to_dict",
           "SymbolJSONError", "mxnet_version", "MXNET_VERSION"]


class SymbolJSONError(ParseError):
    """Well-formed JSON that is not a valid MXNet symbol (located)."""


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
def load_json(text: str, *, source: str = "<string>") -> Graph:
    """Parse MXNet symbol JSON *text* into a :class:`Graph` (upgraded to 1.9.1).

    *source* names the text in error messages (a file name).
    """
    if not isinstance(text, str):
        raise TypeError(f"load_json expects str, got {type(text).__name__}")
    # The parse allocates tens of thousands of objects and no reference cycles;
    # pausing the cyclic GC meanwhile saves a third of the time on big files.
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        doc = parse_json(text, source=source)
        graph = _Reader(SourceText(text, source)).top(doc)
        if subgraph_depth(graph, MAX_SUBGRAPH_DEPTH) > MAX_SUBGRAPH_DEPTH:
            raise SymbolJSONError(f"subgraphs nested more than {MAX_SUBGRAPH_DEPTH} levels "
                                  f"deep; mxc refuses deeper nesting", source=source)
        return graph
    finally:
        if paused:
            gc.enable()


def load_json_file(path) -> Graph:
    """Read and parse a symbol JSON file (UTF-8, an optional BOM is skipped)."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FrontendError(f"{source}: cannot read symbol file: "
                            f"{exc.strerror or exc}") from None
    return load_json_bytes(data, source=source)


def load_json_bytes(data: bytes, *, source: str = "<bytes>") -> Graph:
    """Parse a symbol JSON given as bytes (a file's, or standard input's): UTF-8, an
    optional BOM skipped; a .params or other binary file is named for what it is."""
    from .params import LIST_MAGIC
    if data[:8] == LIST_MAGIC.to_bytes(8, "little"):
        raise FrontendError(f"{source} is a .params file (MXNet NDArray list), not a symbol "
                            f"JSON: give the model's prefix-symbol.json and this file with "
                            f"--params (mxc inspect {source} lists its arrays)")
    kind = binary_kind(data)
    if kind is not None:
        raise FrontendError(f"{source}: this is {kind}, not a symbol JSON: give the model's "
                            f"prefix-symbol.json")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        head = data[:exc.start].decode("utf-8-sig", errors="replace")
        line = head.count("\n") + 1
        col = len(head) - (head.rfind("\n") + 1) + 1
        raise ParseError(f"invalid UTF-8 byte 0x{data[exc.start]:02x}", source=source,
                         line=line, column=col) from None
    return load_json(text, source=source)


def binary_kind(data: bytes) -> str | None:
    """What a file given as a symbol JSON is when it is plainly not text: ``"an .npz
    file (numpy arrays)"``, ``"an .mxc artifact"`` ...; None for anything that may be
    text (a JSON with one bad byte still gets the line and column of that byte)."""
    if data[:4] == b"PK\x03\x04":   # a zip: which kind, from the names of its members
        import io
        import zipfile
        try:
            names = zipfile.ZipFile(io.BytesIO(data)).namelist()
        except (zipfile.BadZipFile, ValueError, OSError):
            names = []
        if "manifest.json" in names:
            return "an .mxc artifact (run it with mxc run, look inside with mxc inspect)"
        if names and all(n.endswith(".npy") for n in names):
            return "an .npz file (numpy arrays; inputs go to mxc run --inputs)"
        return "a zip archive"
    for magic, kind in ((b"\x93NUMPY", "an .npy file (a numpy array)"),
                        (b"\x7fELF", "a compiled library (ELF)"),
                        (b"\x1f\x8b", "a gzip-compressed file"),
                        (b"\x89HDF", "an HDF5 file")):
        if data.startswith(magic):
            return kind
    head = data[:4096]
    if b"\0" in head:
        return "a binary file (or text not in UTF-8)"
    return None


def graph_from_dict(doc: Any, *, source: str = "<dict>") -> Graph:
    """Build a :class:`Graph` from already-parsed symbol JSON (``json.loads``).

    Validation and upgrades are the same as :func:`load_json`; errors name the
    node but have no line/column (plain dicts carry no positions).
    """
    return _Reader(SourceText("", source)).top(doc)


def _mark_np_shape(graph: Graph) -> None:
    """Tell every node (nested ones too) that its shape attributes are NumPy shapes."""
    for node in graph.nodes:
        node.meta["np_shape"] = True
        for sub in node.subgraphs:
            _mark_np_shape(sub)


def _is_uint(v: Any) -> bool:
    return type(v) is int and v >= 0  # bool is not an int here


class _Reader:
    """Validates and converts one document (and its nested subgraphs)."""

    def __init__(self, src: SourceText):
        self.src = src
        self._ops: dict[str, Any] = {}  # op name -> OpDef | None (registered?)

    # -- errors -------------------------------------------------------------------
    def fail(self, message: str, at: Any = None, key: str | None = None,
             offset: int | None = None) -> SymbolJSONError:
        if offset is None and at is not None:
            offset = self.src.key_offset(at, key) if key is not None \
                else getattr(at, "offset", None)
        return self.src.error(message, offset, SymbolJSONError)

    def _opdef(self, op: str):
        try:
            return self._ops[op]
        except KeyError:
            pass
        from ..compiler.ops.registry import get_op, has_op
        try:
            found = get_op(op) if has_op(op) else None
        except Exception:  # an op module that fails to import: treat op as unknown
            found = None
        self._ops[op] = found
        return found

    # -- the top level ------------------------------------------------------------
    def top(self, doc: Any) -> Graph:
        graph = self.graph(doc, "")
        version = LEGACY_VERSION
        if "mxnet_version" in graph.attrs:
            v = graph.attrs["mxnet_version"]
            if not (isinstance(v, list) and len(v) == 2 and v[0] == "int" and _is_uint(v[1])):
                attrs = doc.get("attrs")
                raise self.fail('attrs: "mxnet_version" must be ["int", <version>], e.g. '
                                '["int", 10901]', attrs, "mxnet_version")
            version = v[1]
        if version < MXNET_VERSION:
            upgrade_graph(graph, version)
            graph.attrs["mxnet_version"] = ["int", MXNET_VERSION]
        if graph.is_np_shape:
            _mark_np_shape(graph)
        return graph

    def graph(self, doc: Any, where: str) -> Graph:
        """One symbol object -> Graph (without upgrades). *where*: message prefix."""
        if not isinstance(doc, dict):
            raise self.fail(f"{where}a symbol must be a JSON object with 'nodes' and 'heads', "
                            f"got {describe_type(doc)}", doc)
        for field in ("nodes", "heads"):
            if field not in doc:
                raise self.fail(f"{where}missing required field '{field}'", doc)
        jnodes = doc["nodes"]
        if not isinstance(jnodes, list):
            raise self.fail(f"{where}field 'nodes' must be a list of node objects, got "
                            f"{describe_type(jnodes)}", doc, "nodes")

        nodes: list[Node] = []
        for i, jn in enumerate(jnodes):
            nodes.append(self.node(jn, i, nodes, jnodes, where))

        heads = self.entries(doc["heads"], doc, "heads", nodes, len(nodes), len(nodes), where,
                             "heads")
        # a Gluon block called twice writes two nodes of one name: keep both names, and
        # remember their positions so messages can say which node they mean
        mark_repeated_names(nodes)

        arg_nodes = doc.get("arg_nodes")
        if arg_nodes is not None:
            if not isinstance(arg_nodes, list):
                raise self.fail(f"{where}field 'arg_nodes' must be a list of node indices, "
                                f"got {describe_type(arg_nodes)}", doc, "arg_nodes")
            n_nodes = len(nodes)
            for k, nid in enumerate(arg_nodes):
                if _is_uint(nid) and nid < n_nodes and nodes[nid].op is None:
                    continue
                at = self.src.item_offset(arg_nodes, k)
                if not _is_uint(nid):
                    raise self.fail(f"{where}arg_nodes[{k}] must be a node index, got "
                                    f"{describe_type(nid)}", offset=at)
                if nid >= n_nodes:
                    raise self.fail(f"{where}arg_nodes[{k}] refers to node {nid}, which does "
                                    f"not exist ({_count_nodes(n_nodes)})", offset=at)
                if nodes[nid].op is not None:
                    raise self.fail(f"{where}arg_nodes[{k}] lists node {nid} "
                                    f"({nodes[nid].name!r}), which is an operator "
                                    f"({nodes[nid].op}), not a variable", offset=at)

        row_ptr = doc.get("node_row_ptr")
        if row_ptr is not None:
            if not isinstance(row_ptr, list) or not all(_is_uint(v) for v in row_ptr):
                raise self.fail(f"{where}field 'node_row_ptr' must be a list of "
                                f"non-negative integers", doc, "node_row_ptr")
            if len(row_ptr) == len(nodes) + 1:
                # MXNet ignores it on load.  Remember each op's output count as
                # the writing MXNet build saw it (an MKLDNN build gives max
                # Pooling a hidden workspace output, for instance), so that an
                # unchanged node is written back with the same count.
                for i, node in enumerate(nodes):
                    n = row_ptr[i + 1] - row_ptr[i]
                    if n >= 1 and node.op is not None:
                        node.meta["json_num_outputs"] = (node.op, dict(node.attrs), n)

        attrs = doc.get("attrs")
        if attrs is not None and not isinstance(attrs, dict):
            raise self.fail(f"{where}field 'attrs' must be an object, got "
                            f"{describe_type(attrs)}", doc, "attrs")

        # a symbol is its outputs: drop what no head reaches, keep file order
        reachable = post_order(e.node for e in heads)
        if len(reachable) != len(nodes):
            live = {id(n) for n in reachable}
            nodes = [n for n in nodes if id(n) in live]
        return Graph(nodes, heads, plain(attrs) if attrs else {})

    # -- one node -----------------------------------------------------------------
    def node(self, jn: Any, i: int, nodes: list[Node], jnodes: list, where: str) -> Node:
        if not isinstance(jn, dict):
            raise self.fail(f"{where}node {i} must be an object, got {describe_type(jn)}",
                            offset=self.src.item_offset(jnodes, i))
        op = jn.get("op")
        name = jn.get("name")
        label = f"{where}node {i}"
        if isinstance(name, str):
            label = f"{where}node {i} ({name!r})"
        for field in ("op", "name", "inputs"):
            if field not in jn:
                raise self.fail(f"{label}: missing required field '{field}'", jn)
        if not isinstance(op, str):
            raise self.fail(f"{label}: field 'op' must be a string (an operator name or "
                            f"\"null\"), got {describe_type(op)}", jn, "op")
        if not isinstance(name, str):
            raise self.fail(f"{label}: field 'name' must be a string, got "
                            f"{describe_type(name)}", jn, "name")
        if op == "":
            raise self.fail(f"{label}: field 'op' is empty (write \"null\" for a variable)",
                            jn, "op")

        # attributes: attrs (1.x) / attr (0.9) / param (0.8)
        attrs: dict[str, str] = {}
        params = None
        for field in jn:
            if field in ("attrs", "attr", "param"):
                value = jn[field]
                if not isinstance(value, dict):
                    raise self.fail(f"{label}: field '{field}' must be an object of strings, "
                                    f"got {describe_type(value)}", jn, field)
                for k, v in value.items():
                    if not isinstance(v, str):
                        raise self.fail(f"{label}: attribute '{k}' must be a string (MXNet "
                                        f"stores every attribute as text), got "
                                        f"{describe_type(v)}", value, k)
                if field == "param":
                    params = value
                else:
                    attrs.update(value)
        if params:
            for k, v in params.items():
                attrs.setdefault(k, v)

        node = Node(None if op == "null" else op, name, attrs)
        node.inputs = self.entries(jn["inputs"], jn, "inputs", nodes, i, len(jnodes),
                                   label + ": ", "inputs")
        if node.op is None and node.inputs:
            raise self.fail(f"{label}: a variable (op \"null\") cannot have inputs", jn,
                            "inputs")

        deps = jn.get("control_deps")
        if deps is not None:
            if not isinstance(deps, list):
                raise self.fail(f"{label}: field 'control_deps' must be a list of node "
                                f"indices, got {describe_type(deps)}", jn, "control_deps")
            for k, nid in enumerate(deps):
                if not _is_uint(nid):
                    raise self.fail(f"{label}: control_deps[{k}] must be a node index, got "
                                    f"{describe_type(nid)}", offset=self.src.item_offset(deps, k))
                if nid >= i:
                    self._bad_reference(nid, i, len(jnodes), f"{label}: control_deps[{k}]",
                                        self.src.item_offset(deps, k))
                node.control_deps.append(nodes[nid])

        subs = jn.get("subgraphs")
        if subs is not None:
            if not isinstance(subs, list):
                raise self.fail(f"{label}: field 'subgraphs' must be a list of symbol "
                                f"objects, got {describe_type(subs)}", jn, "subgraphs")
            for k, sub in enumerate(subs):
                graph = self.graph(sub, f"{label}: subgraph {k}: ")
                if not graph.outputs:  # nothing to compute: running it could only fail later
                    raise self.fail(f"{label}: subgraph {k} has no outputs (empty 'heads'); a "
                                    f"subgraph must compute at least one value", sub, "heads")
                node.subgraphs.append(graph)
        return node

    def _bad_reference(self, nid: int, i: int, total: int, what: str, at: int | None):
        """Raise for node id *nid* used by node *i* (or by heads when i == total)."""
        if nid >= total:
            raise self.fail(f"{what} refers to node {nid}, which does not exist "
                            f"({_count_nodes(total)})", offset=at)
        if nid == i:
            raise self.fail(f"{what} refers to the node itself (a cycle)", offset=at)
        raise self.fail(f"{what} refers to node {nid}, which comes later: a forward "
                        f"reference (symbol JSON lists every node after its inputs, so this "
                        f"is a cycle or a corrupt file)", offset=at)

    # -- entries ------------------------------------------------------------------
    def entries(self, value: Any, parent: Any, field: str, nodes: list[Node], limit: int,
                total: int, label: str, what: str) -> list[Entry]:
        """Validate an array of [node, index(, version)] and make Entries.

        Node ids must be below *limit* (the consumer's own index for node
        inputs, the node count for heads); *total* is the node count.
        """
        if not isinstance(value, list):
            raise self.fail(f"{label}field '{field}' must be a list of [node, index, version] "
                            f"triples, got {describe_type(value)}", parent, field)
        out: list[Entry] = []
        for k, e in enumerate(value):
            if not (isinstance(e, list) and 2 <= len(e) <= 3 and all(_is_uint(x) for x in e)):
                raise self.fail(f"{label}{what}[{k}] must be a [node, index, version] triple "
                                f"of non-negative integers, got {_show(e)}",
                                offset=self.src.item_offset(value, k))
            nid = e[0]
            if nid >= limit:
                self._bad_reference(nid, limit, total, f"{label}{what}[{k}]",
                                    getattr(e, "offset", None))
            producer = nodes[nid]
            index = e[1]
            if index:
                self._check_index(producer, nid, index, f"{label}{what}[{k}]", e)
            out.append(Entry(producer, index, e[2] if len(e) == 3 else 0))
        return out

    def _check_index(self, producer: Node, nid: int, index: int, what: str, e: Any) -> None:
        if producer.op is None:
            raise self.fail(f"{what} uses output {index} of variable {nid} "
                            f"({producer.name!r}), which has only output 0",
                            offset=getattr(e, "offset", None))
        opdef = self._opdef(producer.op)
        if opdef is None:
            return  # unknown op: reported elsewhere, arity unknown
        try:
            n = producer.num_outputs()
        except Exception:  # attributes that do not parse are reported later
            return
        if index >= n:
            raise self.fail(f"{what} uses output {index} of node {nid} ({producer.name!r}, "
                            f"{producer.op}), which has {n} output{'s' if n != 1 else ''}",
                            offset=getattr(e, "offset", None))


def _count_nodes(n: int) -> str:
    return "there is only 1 node" if n == 1 else f"there are {n} nodes"


def _show(value: Any) -> str:
    text = repr(plain(value))
    return text if len(text) <= 40 else text[:40] + "..."
