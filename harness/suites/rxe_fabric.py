"""Soft RoCE between two nodes for the suites that run on rxe only: the rxe
case of fabric.py (rxe0 on each node's L2 NIC, ports ACTIVE, the server's
RoCE v2 GID), and a helper that runs a server on node1 and its client on
node2."""
from __future__ import annotations

import pytest

from harness.suites.fabric import device_name, provider_fabric
from harness.suites.pair import run_pair

DEV = device_name("rxe")


@pytest.fixture(scope="module")
def fabric(nodes, ctx):
    for ready in provider_fabric(nodes, ctx, "rxe"):
        yield {"server": ready.server, "client": ready.client,
               "gid": ready.gid_index[ready.server.name]}


def client_server(fabric, ctx, server_cmd: list[str], client_cmd: list[str], **options):
    """Start the server on node1, run the client on node2 once it listens
    (options: those of pair.run_pair)."""
    pair = run_pair(fabric["server"], fabric["client"], ctx, server_cmd, client_cmd, **options)
    return pair.client, pair.server
