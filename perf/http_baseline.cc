// perf/http_baseline.cc — `http-baseline`, the plain HTTP server scripts/bench divides flurryd's
// HTTP front end into: the same library (libmicrohttpd), the same mode (one thread, epoll,
// HTTP/1.1 keep-alive), answering every GET with the next number of a counter as text
// ("N\n", as flurryd's ?format=text), and nothing else. What flurryd's door costs beyond it is
// the ID work, its checks and its counters.
//   http-baseline --port 8099 [--address 127.0.0.1]     (runs until SIGTERM or SIGINT)
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "base/cli.h"

namespace cli = flurry::cli;

namespace {

std::uint64_t counter = 0;  // only the daemon's one thread touches it

MHD_Result answer(void*, MHD_Connection* connection, const char*, const char* method, const char*,
                  const char*, size_t*, void** request_state) {
  static int marker;
  if (*request_state == nullptr) {  // the head has arrived: answer on the next call
    *request_state = &marker;
    return MHD_YES;
  }
  *request_state = nullptr;
  if (std::string(method) != "GET") return MHD_NO;
  const std::string body = std::to_string(++counter) + "\n";
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
  const MHD_Result queued = MHD_queue_response(connection, MHD_HTTP_OK, response);
  MHD_destroy_response(response);
  return queued;
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;
  cli::App app{
      "http-baseline — a plain libmicrohttpd server answering a counter (scripts/bench's HTTP baseline)"};
  app.add_option("--address", address, "IPv4 address to listen on");
  app.add_option("--port", port, "TCP port")->required()->check(cli::Range(1, 65535));
  try {
    app.parse(argc, argv);
  } catch (const cli::ParseError& error) {
    return app.exit(error);
  }
  sockaddr_in bind_to{};
  bind_to.sin_family = AF_INET;
  bind_to.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &bind_to.sin_addr) != 1) {
    std::fprintf(stderr, "http-baseline: --address '%s' is not an IPv4 address\n", address.c_str());
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // the daemon's thread inherits the mask
  MHD_Daemon* daemon =
      MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD, port, nullptr, nullptr, &answer, nullptr,
                       MHD_OPTION_SOCK_ADDR, &bind_to, MHD_OPTION_CONNECTION_LIMIT, 1024U, MHD_OPTION_END);
  if (daemon == nullptr) {
    std::fprintf(stderr, "http-baseline: cannot listen on %s:%u\n", address.c_str(),
                 static_cast<unsigned>(port));
    return 1;
  }
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  MHD_stop_daemon(daemon);
  return 0;
}
