"""The runtime side of Pysolate: the incremental event graph, the ready frontier, the
speculative lane and the claim table (anyio + networkx)."""

__all__: list[str] = []
