"""Graph mode: build a graph with the ordinary ops, run it with Session.

    g = opforge.Graph()
    with g.as_default():
        x = opforge.placeholder(opforge.float32, shape=[64, 784], name="x")
        y = opforge.softmax(x @ w)          # a node; y.shape from C++
    with opforge.Session(g) as sess:
        out = sess.run(y, feed_dict={x: batch})
"""

from opforge.graph._graph import Graph, Operation, SymbolicTensor, constant, get_default_graph, placeholder
from opforge.graph._session import Session
from opforge.graph.gradients import gradients

__all__ = ["Graph", "Operation", "SymbolicTensor", "Session", "constant", "get_default_graph", "gradients",
           "placeholder"]
