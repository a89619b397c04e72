#include "rdma/nldev.h"

#include <linux/netlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

namespace rdmanet::rdma {

using netns::NlRequest;

namespace {

// nldev messages carry no family header: attributes follow the netlink header directly.
NlRequest nldev_request(int cmd, int flags = 0) {
  static const char kNoHeader = 0;
  return NlRequest(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd), flags, &kNoHeader, 0);
}

NlRequest& put_u8(NlRequest& req, int attr, uint8_t value) { return req.put(attr, &value, 1); }

using Attrs = nlattr * [RDMA_NLDEV_ATTR_MAX + 1];

// The attributes read here, with their types: libnl then rejects a reply whose attribute
// is too short for its type instead of letting a getter read past it.
const std::array<nla_policy, RDMA_NLDEV_ATTR_MAX + 1>& policy() {
  static const auto table = [] {
    std::array<nla_policy, RDMA_NLDEV_ATTR_MAX + 1> p{};
    for (int attr :
         {RDMA_NLDEV_ATTR_DEV_INDEX, RDMA_NLDEV_ATTR_PORT_INDEX, RDMA_NLDEV_ATTR_NDEV_INDEX}) {
      p[attr].type = NLA_U32;
    }
    p[RDMA_NLDEV_ATTR_NODE_GUID].type = NLA_U64;
    for (int attr : {RDMA_NLDEV_ATTR_PORT_STATE, RDMA_NLDEV_ATTR_PORT_PHYS_STATE,
                     RDMA_NLDEV_SYS_ATTR_NETNS_MODE}) {
      p[attr].type = NLA_U8;
    }
    for (int attr :
         {RDMA_NLDEV_ATTR_DEV_NAME, RDMA_NLDEV_ATTR_NDEV_NAME, RDMA_NLDEV_ATTR_DEV_PROTOCOL}) {
      p[attr].type = NLA_STRING;
    }
    return p;
  }();
  return table;
}

bool parse(const nlmsghdr* hdr, Attrs& tb) {
  return nlmsg_parse(const_cast<nlmsghdr*>(hdr), 0, tb, RDMA_NLDEV_ATTR_MAX,
                     const_cast<nla_policy*>(policy().data())) == 0;
}

std::string get_string(const nlattr* attr) {
  if (attr == nullptr) {
    return {};
  }
  const char* text = static_cast<const char*>(nla_data(attr));
  return {text, strnlen(text, static_cast<size_t>(nla_len(attr)))};
}

uint32_t get_u32(const nlattr* attr) { return attr != nullptr ? nla_get_u32(attr) : 0; }

Device parse_device(Attrs& tb) {
  Device dev;
  dev.index = get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
  dev.name = get_string(tb[RDMA_NLDEV_ATTR_DEV_NAME]);
  dev.protocol = get_string(tb[RDMA_NLDEV_ATTR_DEV_PROTOCOL]);
  // In a device reply, PORT_INDEX carries the number of ports.
  dev.ports = get_u32(tb[RDMA_NLDEV_ATTR_PORT_INDEX]);
  if (tb[RDMA_NLDEV_ATTR_NODE_GUID] != nullptr) {
    dev.node_guid = nla_get_u64(tb[RDMA_NLDEV_ATTR_NODE_GUID]);
  }
  return dev;
}

// The kernel answers a get for a device index this netns cannot see (moved away,
// unregistered) with EINVAL, not ENODEV.
Error not_here(Error e) {
  if (e.sys_errno() == EINVAL || e.sys_errno() == ENODEV) {
    return Error(ErrorKind::kDeviceNotFound, e.msg() + " (not in this netns)");
  }
  return e;
}

}  // namespace

std::optional<Device> decode_device(const nlmsghdr* hdr) {
  Attrs tb{};
  if (!parse(hdr, tb) || tb[RDMA_NLDEV_ATTR_DEV_INDEX] == nullptr) {
    return std::nullopt;
  }
  return parse_device(tb);
}

const char* netns_mode_name(NetnsMode mode) {
  // The table's names are string literals, so the view's data() ends in a NUL.
  return name_of(kNetnsModeNames, mode).data();
}

namespace {

// The names `rdma link` prints (iproute2 rdma/link.c), by the kernel's numbers.
constexpr const char* kPortStates[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
constexpr const char* kPhysStates[] = {
    "NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP", "LINK_ERROR_RECOVER", "PHY_TEST"};

template <size_t N>
std::string state_name(const char* const (&names)[N], uint8_t value) {
  return value < N ? names[value] : "UNKNOWN(" + std::to_string(value) + ")";
}

}  // namespace

bool Port::active() const { return state == kPortActive; }

std::string Port::state_summary() const {
  std::string out = state_name(kPortStates, state);
  if (phys_state != 0) {
    out += " (physical state " + state_name(kPhysStates, phys_state) + ")";
  }
  return out;
}

bool is_safe_device_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

bool no_rdma_subsystem(const Error& error) { return error.sys_errno() == EPROTONOSUPPORT; }

Expected<Nldev> Nldev::open_in(const netns::Netns& ns) {
  return netns::in_netns(ns, [] { return Nldev::open(); });
}

Expected<Nldev> Nldev::open() {
  auto sock = netns::Rtnl::open_protocol(NETLINK_RDMA, "RDMA netlink");
  if (!sock && no_rdma_subsystem(sock.error())) {
    return std::move(sock).error().context("no RDMA subsystem in this kernel (is ib_core loaded?)");
  }
  TRY_ASSIGN(netns::Rtnl rtnl, std::move(sock));
  return Nldev(std::move(rtnl));
}

Expected<NetnsMode> Nldev::netns_mode() {
  std::optional<NetnsMode> mode;
  TRY(sock_.query(
      nldev_request(RDMA_NLDEV_CMD_SYS_GET), "read RDMA netns mode", [&](const nlmsghdr* hdr) {
        Attrs tb{};
        if (parse(hdr, tb) && tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE] != nullptr) {
          mode = nla_get_u8(tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]) != 0 ? NetnsMode::kShared
                                                                     : NetnsMode::kExclusive;
        }
      }));
  if (!mode) {
    // Kernels before 5.2 have no netns support at all: every device is shared.
    return NetnsMode::kShared;
  }
  return *mode;
}

Status Nldev::set_netns_mode(NetnsMode mode) {
  auto req = nldev_request(RDMA_NLDEV_CMD_SYS_SET);
  put_u8(req, RDMA_NLDEV_SYS_ATTR_NETNS_MODE, mode == NetnsMode::kShared ? 1 : 0);
  auto s = sock_.request(req, std::string("set RDMA netns mode ") + netns_mode_name(mode));
  if (!s && s.error().sys_errno() == EBUSY) {
    const char* at_boot =
        mode == NetnsMode::kExclusive
            ? "set it at boot instead: `options ib_core netns_mode=0` in /etc/modprobe.d "
              "(deploy/installer/node-prep.sh --exclusive writes it), then reboot"
            : "set it at boot instead: remove the ib_core netns_mode=0 option from "
              "/etc/modprobe.d (shared is the kernel's default), then reboot";
    return Error(ErrorKind::kRdmaIsolation,
                 s.error().msg() +
                     ": the kernel changes the mode only while no network namespace but the "
                     "initial one exists; " +
                     at_boot);
  }
  return s;
}

Expected<std::vector<Device>> Nldev::devices() {
  std::vector<Device> out;
  TRY(sock_.query(nldev_request(RDMA_NLDEV_CMD_GET, NLM_F_DUMP), "list RDMA devices",
                  [&](const nlmsghdr* hdr) {
                    Attrs tb{};
                    if (parse(hdr, tb) && tb[RDMA_NLDEV_ATTR_DEV_INDEX] != nullptr) {
                      out.push_back(parse_device(tb));
                    }
                  }));
  return out;
}

Expected<Device> Nldev::device(uint32_t index) {
  auto req = nldev_request(RDMA_NLDEV_CMD_GET);
  req.put_u32(RDMA_NLDEV_ATTR_DEV_INDEX, index);
  std::optional<Device> found;
  auto s = sock_.query(req, "RDMA device " + std::to_string(index), [&](const nlmsghdr* hdr) {
    Attrs tb{};
    if (parse(hdr, tb) && tb[RDMA_NLDEV_ATTR_DEV_INDEX] != nullptr) {
      found = parse_device(tb);
    }
  });
  if (!s) {
    return not_here(std::move(s).error());
  }
  if (!found) {
    return Error(ErrorKind::kDeviceNotFound,
                 "RDMA device " + std::to_string(index) + ": no reply from the kernel");
  }
  return *found;
}

Expected<Device> Nldev::device(const std::string& name) {
  TRY_ASSIGN(std::vector<Device> all, devices());
  for (auto& dev : all) {
    if (dev.name == name) {
      return dev;
    }
  }
  return Error(ErrorKind::kDeviceNotFound, "RDMA device " + name + " not found in this netns");
}

Expected<std::optional<Port>> Nldev::query_port(const Device& dev, uint32_t index) {
  auto req = nldev_request(RDMA_NLDEV_CMD_PORT_GET);
  req.put_u32(RDMA_NLDEV_ATTR_DEV_INDEX, dev.index).put_u32(RDMA_NLDEV_ATTR_PORT_INDEX, index);
  std::optional<Port> found;
  auto s = sock_.query(req, "port " + std::to_string(index) + " of RDMA device " + dev.name,
                       [&](const nlmsghdr* hdr) {
                         Attrs tb{};
                         if (!parse(hdr, tb)) {
                           return;
                         }
                         Port port;
                         port.index = get_u32(tb[RDMA_NLDEV_ATTR_PORT_INDEX]);
                         port.netdev_index =
                             static_cast<int>(get_u32(tb[RDMA_NLDEV_ATTR_NDEV_INDEX]));
                         port.netdev = get_string(tb[RDMA_NLDEV_ATTR_NDEV_NAME]);
                         if (tb[RDMA_NLDEV_ATTR_PORT_STATE] != nullptr) {
                           port.state = nla_get_u8(tb[RDMA_NLDEV_ATTR_PORT_STATE]);
                         }
                         if (tb[RDMA_NLDEV_ATTR_PORT_PHYS_STATE] != nullptr) {
                           port.phys_state = nla_get_u8(tb[RDMA_NLDEV_ATTR_PORT_PHYS_STATE]);
                         }
                         found = port;
                       });
  if (!s) {
    return not_here(std::move(s).error());
  }
  return found;
}

Expected<Port> Nldev::port(const Device& dev, uint32_t index) {
  TRY_ASSIGN(std::optional<Port> port, query_port(dev, index));
  if (!port) {
    return Error(ErrorKind::kKernel, "port " + std::to_string(index) + " of RDMA device " +
                                         dev.name + ": the kernel's answer does not parse");
  }
  return *port;
}

Expected<std::vector<Port>> Nldev::ports(const Device& dev) {
  std::vector<Port> out;
  for (uint32_t p = 1; p <= dev.ports; ++p) {
    TRY_ASSIGN(std::optional<Port> port, query_port(dev, p));
    if (port) {  // an answer that does not parse is left out, as the rest of the list stands
      out.push_back(std::move(*port));
    }
  }
  return out;
}

Expected<std::vector<Device>> Nldev::devices_of_netdev(int ifindex) {
  TRY_ASSIGN(std::vector<Device> all, devices());
  std::vector<Device> out;
  for (const auto& dev : all) {
    auto ports = this->ports(dev);
    if (!ports) {
      if (ports.error().kind() == ErrorKind::kDeviceNotFound) {
        continue;  // unregistered since the dump
      }
      return std::move(ports).error();
    }
    for (const auto& port : *ports) {
      if (port.netdev_index == ifindex) {
        out.push_back(dev);
        break;
      }
    }
  }
  return out;
}

Status Nldev::move(const Device& dev, const netns::Netns& target) {
  auto req = nldev_request(RDMA_NLDEV_CMD_SET);
  req.put_u32(RDMA_NLDEV_ATTR_DEV_INDEX, dev.index)
      .put_u32(RDMA_NLDEV_NET_NS_FD, static_cast<uint32_t>(target.fd()));
  auto s = sock_.request(req, "move RDMA device " + dev.name + " to netns " + target.path());
  if (!s && s.error().sys_errno() == EOPNOTSUPP) {
    return Error(ErrorKind::kRdmaIsolation,
                 s.error().msg() +
                     ": the kernel moves RDMA devices only in exclusive netns mode and only for "
                     "drivers that support it (mlx5 does; soft-RoCE needs a recent kernel, "
                     "e.g. 7.x)");
  }
  return s;
}

Status Nldev::add_rxe(const std::string& name, const std::string& netdev) {
  auto req = nldev_request(RDMA_NLDEV_CMD_NEWLINK);
  req.put_string(RDMA_NLDEV_ATTR_DEV_NAME, name)
      .put_string(RDMA_NLDEV_ATTR_LINK_TYPE, "rxe")
      .put_string(RDMA_NLDEV_ATTR_NDEV_NAME, netdev);
  auto s = sock_.request(req, "create soft-RoCE device " + name + " on " + netdev);
  if (!s && (s.error().sys_errno() == EINVAL || s.error().sys_errno() == EOPNOTSUPP)) {
    // The kernel loads rdma_rxe on demand; EINVAL is also what it says when it cannot.
    return Error(s.error().kind(), s.error().msg() + " (is the rdma_rxe module available?)");
  }
  return s;
}

Status Nldev::delete_link(const Device& dev) {
  auto req = nldev_request(RDMA_NLDEV_CMD_DELLINK);
  req.put_u32(RDMA_NLDEV_ATTR_DEV_INDEX, dev.index);
  return sock_.request(req, "delete RDMA device " + dev.name);
}

}  // namespace rdmanet::rdma
