"""The kernel's drop counter for a UDP socket, provoked for real on loopback."""

from __future__ import annotations

import socket
import sys

import pytest

from server.socket_stats import udp_socket_stats


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net/udp")
def test_a_full_receive_buffer_counts_drops_and_queued_bytes() -> None:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        rx.bind(("127.0.0.1", 0))
        before = udp_socket_stats(rx)
        assert before is not None and before.drops == 0 and before.rx_queue_bytes == 0
        for _ in range(2000):  # bounded: far more than a 4 KiB buffer holds
            tx.sendto(b"x" * 200, rx.getsockname())
        after = udp_socket_stats(rx)
        assert after is not None
        assert after.drops > 0
        assert after.rx_queue_bytes > 0
        assert after.rcvbuf_bytes >= 4096
    finally:
        rx.close()
        tx.close()
    assert udp_socket_stats(rx) is None
