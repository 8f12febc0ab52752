// This process's TCP connections, found and shut down from outside their owners
// (lib/distributed/detail/sockets.h).
#include "lib/distributed/detail/sockets.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <algorithm>
#include <cstdlib>

namespace workload::detail {

namespace {

bool same_socket(const SocketId& id) {
  struct stat st {};
  return ::fstat(id.fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == id.inode;
}

// The numeric address and port of `addr`, or port -1 for a family other than IPv4/IPv6.
std::pair<std::string, int> endpoint_of(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    return {text, ntohs(in->sin_port)};
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    std::string s = text;
    // An IPv4 peer of a dual-stack socket reads as ::ffff:a.b.c.d.
    if (s.rfind("::ffff:", 0) == 0 && s.find('.') != std::string::npos) s = s.substr(7);
    return {s, ntohs(in6->sin6_port)};
  }
  return {"", -1};
}

std::pair<std::string, int> peer_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {"", -1};
  return endpoint_of(addr);
}

int local_port_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return endpoint_of(addr).second;
}

}  // namespace

std::vector<SocketId> tcp_sockets() {
  std::vector<SocketId> out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return out;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    struct stat st {};
    if (fd == ::dirfd(dir) || ::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int type = 0;
    socklen_t len = sizeof(type);
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) continue;
    if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) continue;
    out.push_back({fd, st.st_ino});
  }
  ::closedir(dir);
  return out;
}

std::vector<SocketId> new_sockets(const std::vector<SocketId>& before,
                                  const std::vector<SocketId>& after, int skip_port) {
  std::vector<SocketId> out;
  for (const SocketId& s : after) {
    const bool old = std::any_of(before.begin(), before.end(), [&](const SocketId& b) {
      return b.fd == s.fd && b.inode == s.inode;
    });
    if (old || local_port_of(s.fd) == skip_port || peer_of(s.fd).second == skip_port) continue;
    out.push_back(s);
  }
  return out;
}

void shutdown_sockets(const std::vector<SocketId>& ids) {
  for (const SocketId& id : ids) {
    if (same_socket(id)) ::shutdown(id.fd, SHUT_RDWR);
  }
}

int shutdown_connections_to(const std::vector<std::string>& addresses, int port) {
  int n = 0;
  for (const SocketId& id : tcp_sockets()) {
    const auto [address, peer_port] = peer_of(id.fd);
    if (peer_port != port) continue;
    if (!addresses.empty() &&
        std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
      continue;
    }
    if (same_socket(id) && ::shutdown(id.fd, SHUT_RDWR) == 0) ++n;
  }
  return n;
}

int bound_server_receives(int port, std::chrono::milliseconds timeout) {
  timeval bound{};
  bound.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  bound.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  std::vector<SocketId> listeners, accepted;
  for (const SocketId& id : tcp_sockets()) {
    if (local_port_of(id.fd) != port) continue;
    // A listening socket has no peer; one it accepted has. (A client of this process connected to
    // `port` has another local port.)
    (peer_of(id.fd).second < 0 ? listeners : accepted).push_back(id);
  }
  if (listeners.empty()) return 0;
  int n = 0;
  // The listeners first: a connection accepted after the scan inherits the bound.
  for (const std::vector<SocketId>* ids : {&listeners, &accepted}) {
    for (const SocketId& id : *ids) {
      if (::setsockopt(id.fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound)) == 0) ++n;
    }
  }
  return n;
}

std::vector<std::string> resolve(const std::string& host) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    sockaddr_storage addr{};
    std::copy_n(reinterpret_cast<const char*>(a->ai_addr),
                std::min<std::size_t>(a->ai_addrlen, sizeof(addr)), reinterpret_cast<char*>(&addr));
    const std::string text = endpoint_of(addr).first;
    if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
  }
  ::freeaddrinfo(found);
  return out;
}

}  // namespace workload::detail
