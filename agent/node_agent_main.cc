// The node agent's process: rounds every interval on this thread, /metrics and /healthz on
// the metrics server's (agent/metrics_server.h), SIGTERM/SIGINT through a signalfd. A
// scrape during a round gets the last round's figures; a round never runs twice at once.
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>

#include "agent/metrics_server.h"
#include "agent/node_agent.h"
#include "base/fd.h"
#include "cni/log.h"

namespace rdmanet::agent {

namespace {

using Clock = std::chrono::steady_clock;

// What the rounds publish for the HTTP thread (agent/metrics_server.h).
class Published {
 public:
  void set(std::string metrics, Clock::time_point healthy_until) {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_ = std::move(metrics);
    healthy_until_ = healthy_until;
  }
  AgentStatus get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return {metrics_, healthy_until_ && Clock::now() <= *healthy_until_};
  }

 private:
  mutable std::mutex mu_;
  std::string metrics_;
  std::optional<Clock::time_point> healthy_until_;
};

}  // namespace

int node_agent_main(const std::vector<std::string>& args,
                    std::span<const cni::Plugin* const> linked_ipam) {
  cni::init_logging("rdmanet node-agent");
  spdlog::set_level(spdlog::level::info);  // its teardowns are worth a line each
  auto config = parse_agent_args(args);
  if (!config) {
    std::cerr << "rdmanet node-agent: " << config.error().msg() << "\n";
    return 2;
  }
  NodeAgent agent(*config, linked_ipam);
  if (config->once) {
    return agent.round().messages.empty() ? 0 : 1;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  Fd signals(::signalfd(-1, &stop, SFD_CLOEXEC));
  // Started after the signals are blocked: its thread inherits the mask, so SIGTERM is
  // read from the signalfd here, whichever thread the kernel picks.
  Published published;
  published.set(agent.metrics(), {});
  std::unique_ptr<MetricsServer> http;
  if (!config->listen.empty()) {
    auto server = MetricsServer::start(config->listen, [&published] { return published.get(); });
    if (!server) {
      std::cerr << "rdmanet node-agent: " << server.error().msg() << "\n";
      return 1;
    }
    http = std::move(*server);
  }
  std::cerr << "rdmanet node-agent: every " << config->interval.count() << " s, grace "
            << config->grace.count() << " s"
            << (config->listen.empty() ? "" : ", metrics on " + config->listen) << "\n";
  auto next = Clock::now();
  for (;;) {
    if (Clock::now() >= next) {
      agent.round();
      published.set(agent.metrics(), agent.healthy_until());
      next = Clock::now() + config->interval;
    }
    pollfd p{signals.get(), POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) < 0 && errno != EINTR) {
      std::cerr << "rdmanet node-agent: poll: " << std::strerror(errno) << "\n";
      return 1;
    }
    if (p.revents != 0) {
      std::cerr << "rdmanet node-agent: stopping\n";
      return 0;
    }
  }
}

}  // namespace rdmanet::agent
