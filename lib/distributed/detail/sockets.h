// This process's TCP connections, found and shut down from outside their owners: how the
// distributed watchdog ends waits inside c10d's TCPStore and Gloo, which have no abort of their own
// (LibTorch 1.13).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace workload::detail {

/// A socket of this process: its descriptor and inode (a descriptor number may be reused).
struct SocketId {
  int fd = -1;
  ino_t inode = 0;
};

/// This process's IPv4 and IPv6 stream sockets (listening and connected), from /proc/self/fd.
std::vector<SocketId> tcp_sockets();

/// The sockets of `after` not in `before`, less those whose local or remote port is `skip_port`
/// (the rendezvous store's connections): the connections something opened in between.
std::vector<SocketId> new_sockets(const std::vector<SocketId>& before,
                                  const std::vector<SocketId>& after, int skip_port);

/// shutdown(SHUT_RDWR) on each socket of `ids` that is still open as the same socket. A blocked
/// recv on it returns at once (end of stream); the descriptor stays open for its owner to close.
void shutdown_sockets(const std::vector<SocketId>& ids);

/// shutdown(SHUT_RDWR) on every TCP connection of this process to `port` at one of `addresses`
/// (numeric, as resolve() gives them; any address when empty). Returns how many.
int shutdown_connections_to(const std::vector<std::string>& addresses, int port);

/// Bounds every blocking receive of the TCP server listening on `port` in this process: SO_RCVTIMEO
/// on its listening sockets, which the connections it accepts from now on inherit (Linux copies
/// socket options to an accepted socket), and on the connections it accepted already. A receive
/// that waits `timeout` without a byte then fails instead of waiting for ever. Returns how many
/// sockets it bounded: 0 when nothing listens on `port` here.
int bound_server_receives(int port, std::chrono::milliseconds timeout);

/// The numeric addresses `host` resolves to ("127.0.0.1", "::1"); empty when it does not resolve.
std::vector<std::string> resolve(const std::string& host);

}  // namespace workload::detail
