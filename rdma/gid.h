// RoCE GIDs: what a pod's RDMA device advertises for the pod's addresses, and the GID
// index applications need (NCCL_IB_GID_INDEX, ibv_rc_pingpong -g). The kernel fills the
// table asynchronously after an address is added, so ADD waits for it, bounded.
//
// The table is read from sysfs (/sys/class/infiniband/<dev>/ports/<port>/gids/<i>,
// gid_attrs/types/<i>, gid_attrs/ndevs/<i>); RDMA netlink does not report it. In exclusive
// mode a pod's device is in sysfs only as the pod's netns sees it, so the waiting reads
// happen through netns::in_netns_sysfs.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "netns/ip_address.h"
#include "netns/netns.h"

namespace rdmanet::rdma {

struct Gid {
  uint32_t index = 0;
  netns::IpAddress gid;  // as an IPv6 address: "::ffff:10.56.0.2", "fe80::..."
  std::string type;      // "RoCE v2", "IB/RoCE v1"
  std::string netdev;    // the netdev the GID belongs to, when it has one
  bool roce_v2() const { return type == "RoCE v2"; }
};

// The GID RoCE uses for an address: ::ffff:a.b.c.d for IPv4, the address itself for IPv6.
netns::IpAddress roce_gid_of(const netns::IpAddress& addr);

// The populated (non-zero) entries of a port's GID table under sysfs_root ("/sys").
// kDeviceNotFound when the device or port is not there.
Expected<std::vector<Gid>> read_gids(const std::string& sysfs_root, const std::string& device,
                                     uint32_t port);

// One RDMA device port's GIDs and, per pod address, the index of its RoCE v2 GID.
struct GidReport {
  std::string device;
  uint32_t port = 1;
  std::vector<Gid> table;
  struct Entry {
    netns::IpAddress address;
    int index = -1;  // -1: no RoCE v2 GID (yet)
  };
  std::vector<Entry> addresses;

  bool complete() const;
  // The RoCE v2 GID index of the first address that has one (IPv4 before IPv6); -1 if none.
  int v2_index() const;
  // "rxe0 port 1: 10.56.0.2 -> GID index 1 (::ffff:10.56.0.2)"; lists the table when an
  // address has no GID.
  std::string summary() const;
  nlohmann::json to_json() const;
  static Expected<GidReport> from_json(const nlohmann::json& doc);
};

// Fills report.addresses from report.table.
void match_addresses(GidReport* report, const std::vector<netns::IpAddress>& addresses);

// Waits until port `port` of `device`, as seen from netns ns, has a RoCE v2 GID for every
// address, polling for at most `timeout`. kGidTimeout when one is still missing then; its
// message names the device, the missing addresses and the GIDs the table holds.
// sysfs_root is where the reader (inside ns, with ns's own sysfs on /sys) looks; tests
// point it at a fake tree.
Expected<GidReport> wait_for_roce_gids(const netns::Netns& ns, const std::string& device,
                                       uint32_t port,
                                       const std::vector<netns::IpAddress>& addresses,
                                       std::chrono::milliseconds timeout,
                                       const std::string& sysfs_root = "/sys");

// One look at the port's table as seen from netns ns (the same reader as above): an
// address without a RoCE v2 GID has index -1. The node agent keeps pods' files current by it.
Expected<GidReport> read_roce_gids(const netns::Netns& ns, const std::string& device, uint32_t port,
                                   const std::vector<netns::IpAddress>& addresses,
                                   const std::string& sysfs_root = "/sys");

}  // namespace rdmanet::rdma
