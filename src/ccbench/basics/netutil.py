"""Small network facts the workloads need: free ports on an address, whether something listens,
and which TLS version and suite a server negotiates (its servers do not all say so themselves)."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free on ``host`` a moment ago (all bound at once, so no
    port is handed out twice; another process may still take one before it is used)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def listening(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether a TCP connection to host:port is accepted now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def negotiated_tls(
    host: str,
    port: int,
    *,
    cafile: Path | str,
    certfile: Path | str | None = None,
    keyfile: Path | str | None = None,
    alpn: list[str] | None = None,
    server_hostname: str | None = None,
    timeout: float = 5.0,
) -> tuple[str, str]:
    """Connect once to a TLS server, verifying it against ``cafile`` (with a client certificate for
    mutual TLS when given), and return (cipher suite, protocol version) as OpenSSL names them,
    e.g. ('TLS_AES_256_GCM_SHA384', 'TLSv1.3'). Raises OSError or ssl.SSLError when it cannot."""
    context = ssl.create_default_context(cafile=str(cafile))
    if certfile is not None:
        context.load_cert_chain(str(certfile), str(keyfile) if keyfile is not None else None)
    if alpn:
        context.set_alpn_protocols(alpn)
    with socket.create_connection((host, port), timeout=timeout) as raw:
        with context.wrap_socket(raw, server_hostname=server_hostname or host) as tls:
            name, version, _ = tls.cipher()
            return name, version
