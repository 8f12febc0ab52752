// Tests of this process's TCP connections found and acted on from outside their owners
// (lib/distributed/detail/sockets.h), on plain sockets over 127.0.0.1.
#include "lib/distributed/detail/sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <future>

#include "lib/core/unique_fd.h"

namespace workload::detail {
namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// A blocking server listening on 127.0.0.1 (a free port), as c10d's TCPStore of LibTorch 1.13.
class Listener {
 public:
  Listener() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr = loopback(0);
    socklen_t len = sizeof(addr);
    if (fd_.get() < 0 || ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(fd_.get(), 8) != 0 ||
        ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot listen on 127.0.0.1");
    }
    port_ = ntohs(addr.sin_port);
  }
  int port() const { return port_; }
  int accept() const { return ::accept(fd_.get(), nullptr, nullptr); }

 private:
  UniqueFd fd_;
  int port_ = 0;
};

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in addr = loopback(port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A blocking receive of one byte on `fd`: how it ended (-1 with errno, 0 at the end of the stream)
// and after how long, given up after 10 s (a wait the bound did not end).
struct Receive {
  ssize_t got = 0;
  int error = 0;
  double seconds = 0;
};
std::future<Receive> receive_async(int fd) {
  return std::async(std::launch::async, [fd] {
    const auto start = Clock::now();
    char byte = 0;
    Receive r;
    r.got = ::recv(fd, &byte, 1, 0);
    r.error = r.got < 0 ? errno : 0;
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return r;
  });
}

TEST(BoundServerReceivesTest, NothingListeningOnThePortIsNothingBounded) {
  const Listener server;
  const UniqueFd client(connect_to(server.port()));
  ASSERT_GE(client.get(), 0);
  EXPECT_EQ(bound_server_receives(server.port() == 65535 ? 65534 : server.port() + 1,
                                  std::chrono::milliseconds(100)),
            0);
}

// The connection accepted before the call and the one accepted after it (which inherits the
// listener's bound) both end a receive that gets no byte after the bound, with EAGAIN; a client's
// socket to that port (another local port) is not the server's and keeps waiting.
TEST(BoundServerReceivesTest, AReceiveOnAConnectionTheServerAcceptedEndsAfterTheBound) {
  const Listener server;
  const UniqueFd early_client(connect_to(server.port()));
  const UniqueFd early(server.accept());
  ASSERT_GE(early.get(), 0);
  EXPECT_EQ(bound_server_receives(server.port(), std::chrono::milliseconds(300)), 2)
      << "the listener and the connection it accepted";
  const UniqueFd late_client(connect_to(server.port()));
  const UniqueFd late(server.accept());
  ASSERT_GE(late.get(), 0);

  // On a failure, ends every receive still waiting, so that its future (which joins) can go.
  const auto end_receives = [&] {
    for (const int fd : {early.get(), late.get(), late_client.get()}) ::shutdown(fd, SHUT_RDWR);
  };
  std::future<Receive> client_side = receive_async(late_client.get());
  for (const int fd : {early.get(), late.get()}) {
    std::future<Receive> pending = receive_async(fd);
    if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      end_receives();
      FAIL() << "a receive still waiting 10 s later";
    }
    const Receive r = pending.get();
    EXPECT_EQ(r.got, -1);
    EXPECT_TRUE(r.error == EAGAIN || r.error == EWOULDBLOCK) << r.error;
    EXPECT_GE(r.seconds, 0.25);
  }
  EXPECT_EQ(client_side.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
      << "the client's receive ended: the bound reached a socket that is not the server's";
  ::shutdown(late.get(), SHUT_RDWR);  // ends the client's receive: end of stream
  ASSERT_EQ(client_side.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(client_side.get().got, 0);
}

// shutdown_sockets() ends a receive already waiting on a socket it names.
TEST(ShutdownSocketsTest, AWaitingReceiveEndsAtTheEndOfTheStream) {
  const Listener server;
  const std::vector<SocketId> before = tcp_sockets();
  const UniqueFd client(connect_to(server.port()));
  ASSERT_GE(client.get(), 0);
  const std::vector<SocketId> opened = new_sockets(before, tcp_sockets(), -1);
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0].fd, client.get());
  std::future<Receive> pending = receive_async(client.get());
  EXPECT_EQ(pending.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  shutdown_sockets(opened);
  if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ::shutdown(client.get(), SHUT_RDWR);  // so that the future (which joins) can go
    FAIL() << "the receive still waits 10 s after shutdown_sockets()";
  }
  EXPECT_EQ(pending.get().got, 0);
}

}  // namespace
}  // namespace workload::detail
