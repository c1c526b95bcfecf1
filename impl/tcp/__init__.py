"""The reference cluster over TCP: each broker and the metadata store an OS process.

- `framing`: length-prefixed frames with a size cap, a sans-I/O decoder, and the proofs of the
  handshake by which every connection shows it belongs to the run (a per-run key).
- `node`: one core behind trio sockets (`python -m impl.tcp.node`, the key on its stdin).
- `supervisor`: `run_cluster(config, options, out_dir)` spawns the nodes, runs the producer
  and consumer in-process, injects faults with real signals and writes the run directory.

The names are loaded lazily so that `python -m impl.tcp.node` does not import itself twice.
"""

__all__ = ["ClusterError", "TcpOptions", "run_cluster"]


def __getattr__(name: str):
    if name in __all__:
        from impl.tcp import supervisor

        return getattr(supervisor, name)
    raise AttributeError(f"module 'impl.tcp' has no attribute {name!r}")
