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

// What the step saw, and how: the port's state is asked through one socket, opened when
// first needed. A failed look is reported as the state ("unknown (...)"): the step only
// looks, and whether a rail it could not see fails ADD is requireActive's to say.
class PortLook {
 public:
  PortLook(const Attachment& a, std::optional<PortToAsk> ask) : a_(a), ask_(std::move(ask)) {
    if (ask_) {
      seen_.rdma_port = ask_->device.name + "/" + std::to_string(ask_->port);
      seen_.rdma_state = "not asked (no carrier)";
    }
  }
  bool has_port() const { return ask_.has_value(); }
  RailLink& seen() { return seen_; }

  void ask_port() {
    if (auto s = try_ask(); !s) {
      seen_.rdma_active = false;
      seen_.rdma_state = "unknown (" + s.error().msg() + ")";
    }
  }

 private:
  Status try_ask() {
    if (!nldev_) {
      TRY_ASSIGN(nldev_, ask_->in_pod ? rdma::Nldev::open_in(*a_.pod()) : rdma::Nldev::open());
    }
    TRY_ASSIGN(rdma::Port port, nldev_->port(ask_->device, ask_->port));
    seen_.rdma_active = port.active();
    seen_.rdma_state = port.state_summary();
    return ok_status();
  }

  const Attachment& a_;
  std::optional<PortToAsk> ask_;
  std::optional<rdma::Nldev> nldev_;
  RailLink seen_;
};

// Waits on the link's notifications until the rail is usable or the deadline passes.
// kDeviceNotFound when the pod interface is gone (the pod deleted or moved it).
Status watch_until_usable(const Attachment& a, PortLook& look, steady_clock::time_point deadline) {
  RailLink& seen = look.seen();
  auto watch = netns::LinkWatch::open(*a.pod(), a.pod_link().index, deadline);
  if (!watch) {
    if (watch.error().kind() == ErrorKind::kDeviceNotFound) {
      return std::move(watch).error();
    }
    seen.carrier = false;  // not seen: reported as down, with why
    seen.rdma_state = "unknown (" + watch.error().msg() + ")";
    return ok_status();
  }
  // The deadline is checked on every pass, however many notifications come: the pod may
  // change its own links as fast as it likes. The port is asked when carrier comes and then
  // at growing intervals, never once per notification.
  milliseconds retry = kFirstRetry;
  auto ask_at = steady_clock::now();
  for (;;) {
    const bool had_carrier = seen.carrier;
    seen.carrier = netns::has_carrier(watch->link());
    const auto now = steady_clock::now();
    if (seen.carrier && !had_carrier) {
      ask_at = now;
      retry = kFirstRetry;
    }
    if (seen.carrier && look.has_port() && now >= ask_at) {
      look.ask_port();
      ask_at = now + retry;
      retry = std::min(retry * 2, kLongestRetry);
    }
    if (seen.usable() || now >= deadline) {
      return ok_status();
    }
    const auto wake = seen.carrier && look.has_port() ? std::min(deadline, ask_at) : deadline;
    TRY(watch->next(wake));
  }
}

}  // namespace

Status wait_for_port(Attachment& a) {
  const PluginConf& conf = a.conf();
  const std::string& ifname = a.rec().ifname;
  const auto start = steady_clock::now();
  PortLook look(a, port_to_ask(a));
  TRY(watch_until_usable(a, look, start + milliseconds(conf.port_timeout_ms))
          .with_context("waiting for " + ifname));
  RailLink seen = look.seen();
  if (!seen.usable() && look.has_port() && !seen.carrier &&
      seen.rdma_state.starts_with("not asked")) {
    look.ask_port();  // for the message: the port's state although the link never came
    seen = look.seen();
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
