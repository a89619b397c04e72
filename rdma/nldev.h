// The kernel's RDMA device interface (RDMA netlink, "nldev"): the node's netns mode, RDMA
// devices and their ports, soft-RoCE links, and moving a device to another network
// namespace. What `rdma system`, `rdma dev`, `rdma link` do, without shelling out.
//
// An Nldev socket sees the RDMA devices of the network namespace it was opened in: in
// shared mode every device, in exclusive mode only the devices that live there. A port
// reports its netdev only when that netdev is in the socket's namespace, so the
// netdev -> RDMA device mapping is asked for from the netdev's own namespace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/names.h"
#include "netns/netns.h"
#include "netns/rtnl.h"

struct nlmsghdr;

namespace rdmanet::rdma {

// RDMA_NLDEV_SYS_ATTR_NETNS_MODE: 1 = shared (every netns sees every device), 0 = exclusive
// (a device lives in one netns and can be moved).
enum class NetnsMode { kShared, kExclusive };
// As `rdma system` names them.
inline constexpr Name<NetnsMode> kNetnsModeNames[] = {{NetnsMode::kShared, "shared"},
                                                      {NetnsMode::kExclusive, "exclusive"}};
// name_of(kNetnsModeNames, mode) as a C string.
const char* netns_mode_name(NetnsMode mode);

struct Device {
  uint32_t index = 0;    // the kernel's device index: stable across netns moves and renames
  std::string name;      // e.g. "mlx5_3", "rxe0"; names can change, so re-resolve by index
  std::string protocol;  // "roce", "ib", "iw" (empty on kernels that do not report it)
  uint32_t ports = 0;    // number of ports, numbered from 1
  uint64_t node_guid = 0;
};

struct Port {
  uint32_t index = 0;
  int netdev_index = 0;  // 0 when the port has no netdev in this socket's netns
  std::string netdev;
  uint8_t state = 0;       // IB_PORT_* (kPortActive = 4)
  uint8_t phys_state = 0;  // IB_PORT_PHYS_STATE_* (2 polling, 5 link up); 0 when not reported
  bool active() const;
  // "ACTIVE", or "DOWN (physical state POLLING)", as `rdma link` names them.
  std::string state_summary() const;
};
inline constexpr uint8_t kPortActive = 4;

class Nldev {
 public:
  // Opens RDMA netlink in the calling thread's netns. On a kernel without the RDMA
  // subsystem (ib_core not loaded or not built) the error's sys_errno() is EPROTONOSUPPORT.
  static Expected<Nldev> open();
  // The same in `ns` (the socket stays in the netns it was opened in).
  static Expected<Nldev> open_in(const netns::Netns& ns);

  Expected<NetnsMode> netns_mode();
  // The kernel refuses a change while any netns but the initial one exists (EBUSY); the
  // error says so and names the module option that sets the mode at boot instead.
  Status set_netns_mode(NetnsMode mode);

  Expected<std::vector<Device>> devices();
  // kDeviceNotFound when no device has that index/name in this netns (the kernel says
  // EINVAL for an index it does not show here).
  Expected<Device> device(uint32_t index);
  Expected<Device> device(const std::string& name);
  // One port (one request, not a dump); kDeviceNotFound when the device is gone, kKernel
  // when the answer does not parse.
  Expected<Port> port(const Device& dev, uint32_t index);
  Expected<std::vector<Port>> ports(const Device& dev);
  // The devices with a port whose netdev has this ifindex (in the socket's netns).
  Expected<std::vector<Device>> devices_of_netdev(int ifindex);

  // Moves dev to the network namespace `target` (exclusive mode only). The calling thread
  // must be in dev's netns when it calls this (the kernel checks the caller's netns, not
  // the socket's: ENODEV otherwise). The kernel answers EOPNOTSUPP in shared mode and for
  // drivers or kernels that cannot move devices; the error says which.
  Status move(const Device& dev, const netns::Netns& target);

  // Creates a soft-RoCE (rxe) device named `name` on the netdev `netdev` of this socket's
  // netns, as `rdma link add NAME type rxe netdev NETDEV` does. The kernel registers it in
  // the initial netns whatever the socket's netns is.
  Status add_rxe(const std::string& name, const std::string& netdev);
  // Deletes a device created by a link add (rxe); other devices refuse (EINVAL).
  Status delete_link(const Device& dev);

 private:
  explicit Nldev(netns::Rtnl sock) : sock_(std::move(sock)) {}
  // One port get; std::nullopt when the answer does not parse.
  Expected<std::optional<Port>> query_port(const Device& dev, uint32_t index);

  netns::Rtnl sock_;
};

// Decodes an RDMA_NLDEV_CMD_GET reply; std::nullopt without a device index. Exposed for
// the fuzz target (tests/fuzz).
std::optional<Device> decode_device(const nlmsghdr* hdr);

// An RDMA device name that can be a path component (it comes from the kernel or a state
// file, and names sysfs and configfs directories): not empty, ".", ".." or with a '/'.
bool is_safe_device_name(const std::string& name);

// Whether an error means "this kernel has no RDMA subsystem" (no NETLINK_RDMA).
bool no_rdma_subsystem(const Error& error);

}  // namespace rdmanet::rdma
