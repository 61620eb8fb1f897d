"""Planning: the graph of a build directory (graph.load_graph: every stage's plan), the no-op record
(noop: "nothing to do" from stats alone) and `invalidate_binary_cache()`'s mark (invalidation). Imports
no doit. A plain folder."""
