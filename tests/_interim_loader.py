"""Temporary stdlib-json loader used until mxc.frontend.symbol_json exists."""

import json

from mxc.compiler.ir import Entry, Graph, Node


def load_json(text, source="<string>"):
    d = json.loads(text)
    nodes = []
    for jn in d["nodes"]:
        op = None if jn["op"] == "null" else jn["op"]
        attrs = jn.get("attrs", jn.get("attr", jn.get("param", {}))) or {}
        inputs = [Entry(nodes[i[0]], i[1], i[2] if len(i) > 2 else 0) for i in jn["inputs"]]
        node = Node(op, jn["name"], attrs, inputs)
        node.subgraphs = [load_json(json.dumps(s)) for s in jn.get("subgraphs", [])]
        nodes.append(node)
    outs = [Entry(nodes[h[0]], h[1], h[2] if len(h) > 2 else 0) for h in d["heads"]]
    return Graph(nodes, outs, d.get("attrs", {}))
