#include "plugin/steps/port_wait.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "netns/link_watch.h"
#include "plugin/attachment.h"
#include "rdma/nldev.h"

namespace rdmanet::plugin {

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The RDMA port the pod uses, and where its state can be asked: the pod netns when the
// device was moved there, the node's otherwise (shared mode shows every device everywhere).
struct PortToAsk {
  rdma::Device device;
  uint32_t port = 1;
  bool in_pod = false;
};

std::optional<PortToAsk> port_to_ask(const Attachment& a) {
  const RdmaPlan& plan = a.rdma();
  if (!plan.active || !a.rec().rdma || a.rec().rdma->index < 0) {
    return std::nullopt;
  }
  const bool moved = plan.node_mode == rdma::NetnsMode::kExclusive;
  if (moved && !plan.move) {
    return std::nullopt;  // the pod cannot use the device at all (plan_rdma warned)
  }
  const RdmaReport& rdma = *a.rec().rdma;
  rdma::Device dev;
  dev.index = static_cast<uint32_t>(rdma.index);
  dev.name = rdma.device;
  return PortToAsk{dev, rdma.port, moved};
}

// Growing intervals for asking a port that has carrier but is not ACTIVE yet.
constexpr milliseconds kFirstRetry{10};
constexpr milliseconds kLongestRetry{500};

}  // namespace

Status wait_for_port(Attachment& a) {
  const PluginConf& conf = a.conf();
  const std::string& ifname = a.rec().ifname;
  const auto start = steady_clock::now();
  const auto deadline = start + milliseconds(conf.port_timeout_ms);

  TRY_ASSIGN(auto watch, netns::LinkWatch::open(*a.pod(), a.pod_link().index));
  std::optional<PortToAsk> ask = port_to_ask(a);
  std::optional<rdma::Nldev> nldev;
  RailLink seen;
  if (ask) {
    seen.rdma_port = ask->device.name + "/" + std::to_string(ask->port);
    seen.rdma_state = "not asked (no carrier)";
  }
  auto ask_port = [&]() -> Status {
    if (!nldev) {
      TRY_ASSIGN(nldev, ask->in_pod ? rdma::Nldev::open_in(*a.pod()) : rdma::Nldev::open());
    }
    TRY_ASSIGN(rdma::Port port, nldev->port(ask->device, ask->port));
    seen.rdma_active = port.active();
    seen.rdma_state = port.state_summary();
    return ok_status();
  };

  milliseconds retry = kFirstRetry;
  for (;;) {
    seen.carrier = netns::has_carrier(watch.link());
    auto wake = deadline;
    if (seen.carrier && ask) {
      TRY(ask_port());
      if (!seen.rdma_active) {
        wake = std::min(deadline, steady_clock::now() + retry);
        retry = std::min(retry * 2, kLongestRetry);
      }
    }
    if (seen.usable()) {
      break;
    }
    TRY_ASSIGN(bool changed, watch.next(wake).with_context("waiting for " + ifname));
    if (!changed && steady_clock::now() >= deadline) {
      break;
    }
  }
  if (!seen.usable() && ask && !seen.carrier) {
    // For the message: the port's state although the link never came (one request).
    if (auto asked = ask_port(); !asked) {
      seen.rdma_state = "unknown (" + asked.error().msg() + ")";
    }
  }

  const std::chrono::duration<double, std::milli> waited = steady_clock::now() - start;
  a.rail_link() = seen;
  if (seen.usable()) {
    spdlog::info("{} usable after {:.1f} ms: {}", ifname, waited.count(), seen.summary(ifname));
    return ok_status();
  }
  std::string why = seen.summary(ifname) + " after portTimeout " +
                    std::to_string(conf.port_timeout_ms / 1000) + " s";
  if (conf.require_active) {
    return Error(ErrorKind::kPortNotActive, "rail not usable (requireActive): " + why);
  }
  spdlog::warn("rail {} is down: {}; ADD goes on and the pod's files mark it down", ifname, why);
  return ok_status();
}

}  // namespace rdmanet::plugin
