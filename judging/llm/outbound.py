"""Where judge calls may go: the outbound guard (pure module, no Django).

A judge call is an HTTP request from our workers to a URL that a site admin declared (a
provider). Three rules hold on every call, whatever the URL says:

- **Declared URLs only.** `url_problem` refuses URLs that are not plain http(s) origins with
  a path (no user:password@, query or fragment), and `within` tells whether a URL lies under
  one of a provider's base URLs, so a key is only ever sent to its provider.
- **Public addresses only, checked when the socket opens.** `GuardedBackend` resolves the
  host itself, refuses the connection if *any* address it resolves to is loopback, private,
  link-local (cloud metadata services live there: 169.254.169.254, fd00:ec2::254), shared
  (100.64/10), multicast, reserved, site-local (fec0::/10) or unspecified, and connects to
  the address it checked. An IPv6 address that carries an IPv4 one (IPv4-mapped and
  IPv4-compatible, 6to4, Teredo, NAT64) is judged as that IPv4 address, since that is where
  its packets end up: `2002:7f00:1::` (6to4) is 127.0.0.1, `64:ff9b::a9fe:a9fe` (NAT64) is
  the metadata service (`carried_ipv4`).
  Checking at connect time, not when the provider was saved, is what defeats DNS
  rebinding (a name that resolved to a public address yesterday and to 127.0.0.1 now).
  TLS still verifies the certificate against the host *name* (httpcore sends the origin's
  name as SNI), so connecting by address changes nothing for HTTPS. A provider that a
  site admin marks as local (a vLLM on the LAN, Ollama on the same machine) skips this
  check: that is the admin's decision, never a researcher's.
- **No proxies from the environment, no redirects.** The client never reads HTTP(S)_PROXY
  (a proxy would see the key) and never follows a redirect by itself; the caller refuses
  one to another origin (`same_origin`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

import httpcore
import httpx

__all__ = [
    "AddressRefused",
    "GuardedAsyncBackend",
    "GuardedAsyncTransport",
    "GuardedBackend",
    "GuardedTransport",
    "address_problem",
    "carried_ipv4",
    "host_problem",
    "same_origin",
    "url_problem",
    "within",
]

#: Addresses that ipaddress calls global but that serve cloud metadata all the same.
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack (link-local too)
        ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6 (unique local too)
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud (shared space too)
    }
)


#: NAT64 prefixes (RFC 6052 well-known, RFC 8215 local-use): the last 32 bits are the IPv4
#: address a translator sends the packets on to.
NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL_USE = ipaddress.ip_network("64:ff9b:1::/48")
#: IPv4-compatible addresses (RFC 4291, deprecated): ::a.b.c.d; :: and ::1 are themselves.
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class AddressRefused(httpcore.ConnectError):
    """The host resolves to an address judge calls may not reach. A ConnectError, so
    httpx reports it as a failed connection; the message says which address and why."""


def carried_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address, bool] | None:
    """The IPv4 address that `ip` carries, if any: (the form's name, the IPv4 address,
    whether the form may reach public addresses at all). For IPv4-mapped, 6to4 and
    well-known NAT64 addresses the IPv4 address alone decides; Teredo, IPv4-compatible and
    local-use NAT64 addresses are refused even when it is public (a tunnel to a client, a
    deprecated form, a translator of the local network's own choosing)."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        return "an IPv4-mapped", ip.ipv4_mapped, True
    if ip.sixtofour is not None:
        return "a 6to4", ip.sixtofour, True
    if ip.teredo is not None:
        return "a Teredo", ip.teredo[1], False  # the client: NOT of the last 32 bits
    if ip in NAT64_WELL_KNOWN:
        return "a NAT64", low32, True
    if ip in NAT64_LOCAL_USE:
        return "a local-use NAT64", low32, False
    if ip in IPV4_COMPATIBLE and int(ip) > 1:
        return "an IPv4-compatible", low32, False
    return None


def _kind_problem(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """What kind of address `ip` is, when judge calls may not reach it ("a loopback
    address"), or "" for a public one. Says nothing of an IPv4 address it may carry."""
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    for attribute, what in (
        ("is_loopback", "a loopback"),
        ("is_unspecified", "an unspecified"),
        ("is_link_local", "a link-local"),
        ("is_site_local", "a site-local"),  # fec0::/10: deprecated, but routed on some LANs
        ("is_multicast", "a multicast"),
        ("is_reserved", "a reserved"),
        ("is_private", "a private"),
    ):
        if getattr(ip, attribute, False):
            return f"{what} address"
    if not ip.is_global:
        return "not a public address"
    return ""


def address_problem(address: str) -> str:
    """Why judge calls may not connect to `address` (an IP literal), or "" when it is a
    public address. An IPv6 address carrying an IPv4 one is refused whenever that IPv4
    address would be, for the same reason ("2002:7f00:1:: is a 6to4 address of 127.0.0.1,
    a loopback address")."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        carried = carried_ipv4(ip)
        if carried is not None:
            form, ipv4, may_be_public = carried
            problem = _kind_problem(ipv4)
            if problem:
                return f"{ip} is {form} address of {ipv4}, {problem}"
            if may_be_public:
                return ""
            return f"{ip} is {form} address (of {ipv4}), not a public address"
    problem = _kind_problem(ip)
    return f"{ip} is {problem}" if problem else ""


def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror}") from None
    # an AF_INET/AF_INET6 sockaddr starts with the address text; str() only narrows the type
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def host_problem(host: str, port: int = 443) -> str:
    """Why `host` may not be called by a provider that is not local: the first refused
    address it resolves to, or "" when every address is public. A name that does not
    resolve (yet) is no problem here: the call itself will fail on it."""
    try:
        addresses = _resolve(host, port)
    except httpcore.ConnectError:
        return ""
    for address in addresses:
        problem = address_problem(address)
        if problem:
            return f"{host} resolves to {address}: {problem.split(' is ', 1)[1]}"
    return ""


class GuardedBackend(httpcore.SyncBackend):
    """httpcore's socket backend, connecting only to public addresses (see the module)."""

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        address = _checked(host, _resolve(host, port))
        return super().connect_tcp(
            address, port, timeout, local_address=local_address, socket_options=socket_options
        )


class GuardedTransport(httpx.HTTPTransport):
    """httpx's transport on the guarded backend. httpx has no public hook for the network
    backend, so the backend of the connection pool it made is swapped for ours (httpx 0.28
    keeps the pool in `_pool`, httpcore 1.0 the backend in `_network_backend`;
    tests/judging/test_outbound.py fails if either moves)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(trust_env=False, **kwargs)
        assert isinstance(self._pool, httpcore.ConnectionPool)
        self._pool._network_backend = GuardedBackend()


def _checked(host: str, addresses: list[str]) -> str:
    """The first of `addresses` (all checked), or AddressRefused naming the refused one."""
    for address in addresses:
        problem = address_problem(address)
        if problem:
            raise AddressRefused(
                f"refused to connect to {host}: it resolves to {address}, "
                f"{problem.split(' is ', 1)[1]}; only a provider a site admin marks as "
                "local may reach such addresses"
            )
    return addresses[0]


class GuardedAsyncBackend(httpcore.AsyncNetworkBackend):
    """The asyncio twin of GuardedBackend: the host is resolved without blocking the event
    loop, every address checked, and the connection made to the address checked."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        return await self._inner.connect_tcp(
            _checked(host, addresses),
            port,
            timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise AddressRefused("judge calls connect over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedAsyncTransport(httpx.AsyncHTTPTransport):
    """httpx's async transport on the guarded backend (the same swap as GuardedTransport)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(trust_env=False, **kwargs)
        assert isinstance(self._pool, httpcore.AsyncConnectionPool)
        self._pool._network_backend = GuardedAsyncBackend()


def url_problem(url: str) -> str:
    """Why `url` cannot be a provider's base URL, or "" when it can: http or https, a
    host, no credentials, query or fragment."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a URL: {exc}"
    if parts.scheme not in ("http", "https"):
        return "use an http:// or https:// URL"
    if not parts.hostname:
        return "the URL has no host"
    if parts.username is not None or parts.password is not None:
        return "put no user name or password in the URL: declare the key's variable instead"
    if parts.query or parts.fragment:
        return "the URL may have no query (?…) or fragment (#…)"
    if port == 0:
        return "port 0 is not a port"
    return ""


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


def same_origin(a: str, b: str) -> bool:
    return _origin(a) == _origin(b)


def within(base_urls: list[str], url: str) -> bool:
    """Whether `url` is one of `base_urls` or below one (same origin, path under it)."""
    path = urlsplit(url).path.rstrip("/") + "/"
    for base in base_urls:
        if same_origin(base, url) and path.startswith(urlsplit(base).path.rstrip("/") + "/"):
            return True
    return False
