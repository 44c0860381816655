"""What the kernel says about a UDP socket: datagrams it dropped and bytes waiting.

Linux lists every UDP socket in ``/proc/net/udp`` (``udp6`` for IPv6) with its inode, its
receive-queue length and a ``drops`` column that counts datagrams discarded because the receive
buffer was full. The socket is found by its inode, so the figures are this socket's alone. On
systems without ``/proc`` the functions return None.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = ["UdpSocketStats", "udp_socket_stats"]

_TABLES = (Path("/proc/net/udp"), Path("/proc/net/udp6"))


@dataclass(frozen=True, slots=True)
class UdpSocketStats:
    """One UDP socket's kernel figures: ``drops`` (datagrams dropped at the socket since it was
    opened), ``rx_queue_bytes`` (bytes waiting to be read), ``rcvbuf_bytes`` (SO_RCVBUF as the
    kernel reports it: twice the size asked for, for its bookkeeping)."""

    drops: int
    rx_queue_bytes: int
    rcvbuf_bytes: int


def udp_socket_stats(sock: socket.socket) -> UdpSocketStats | None:
    """The kernel's figures for ``sock``, or None when the socket is closed or not listed."""
    try:
        inode = str(os.fstat(sock.fileno()).st_ino)
        rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    except (OSError, ValueError):
        return None
    for table in _TABLES:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            # sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
            if len(cols) >= 13 and cols[9] == inode:
                rx_queue = int(cols[4].split(":")[1], 16)
                return UdpSocketStats(drops=int(cols[12]), rx_queue_bytes=rx_queue, rcvbuf_bytes=rcvbuf)
    return None
