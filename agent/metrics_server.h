// The node agent's HTTP side: GET /metrics and GET /healthz, in a thread of its own, so a
// round in progress never delays a probe and clients never delay a round.
//
// Bounded: at most kMaxConnections at once, each given kRequestTime to send its request
// (then closed); a new client beyond the limit closes the oldest. Idle or slow clients
// (a port scan, a stuck scraper, many at once) can only lose their own connections: the
// kubelet's probe is answered as soon as its request line arrives.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/error.h"
#include "base/fd.h"

namespace rdmanet::agent {

// What the server answers with, published by the rounds.
struct AgentStatus {
  std::string metrics;  // the Prometheus text exposition (format 0.0.4)
  bool healthy = false;
};

class MetricsServer {
 public:
  static constexpr size_t kMaxConnections = 64;
  static constexpr std::chrono::milliseconds kRequestTime{2000};

  // Listens on "IPv4-ADDRESS:PORT" or ":PORT" (port 0: any free one, see port()).
  static Expected<std::unique_ptr<MetricsServer>> start(const std::string& where,
                                                        std::function<AgentStatus()> status);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsServer(Fd listen, Fd stop, int port, std::function<AgentStatus()> status);
  void run();

  Fd listen_;
  Fd stop_;  // an eventfd: written to end run()
  int port_;
  std::function<AgentStatus()> status_;
  std::thread thread_;
};

}  // namespace rdmanet::agent
