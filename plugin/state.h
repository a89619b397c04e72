// What DEL needs to undo an ADD, saved on disk under the state directory:
//   <stateDir>/<network>/<containerID>.<hex(ifname)>.json   one attachment
//   <stateDir>/holds/<device key>                            which attachment holds a device
//   <stateDir>/locks/<device key>.lock                       flock per device
// Files are 0600 in 0700 directories, written atomically (temp file, fsync,
// rename, fsync of the directory). Names are built only from validated
// values (network name and container id match [a-zA-Z0-9][a-zA-Z0-9_.-]*)
// and hex encodings, so no input can point a path outside the state dir.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file_lock.h"
#include "base/hex.h"
#include "netns/netns.h"
#include "netns/vf.h"

namespace rdmanet::plugin {

// The host-side identity of the attached device, recorded before it moves.
struct DeviceRecord {
  std::string name;                   // original name in the host netns
  int index = 0;                      // ifindex (kept across netns moves)
  std::string mac;                    // original MAC
  uint32_t mtu = 0;                   // original MTU
  std::string alias;                  // original IFLA_IFALIAS
  std::vector<std::string> altnames;  // removed before the move, restored after
  std::string pci;                    // PCI address when known
  std::string key;                    // lock/hold key
  bool up = false;                    // administratively up before ADD took it down
};

// A VF whose settings ADD changed through its PF, and what they were before.
struct VfRecord {
  std::string pf_pci;
  std::string pf_name;
  std::string sysfs_root;
  int index = 0;
  netns::VfState original;
};

// The pod's RDMA device: which one, and what ADD did to it. Each flag is saved before the
// change it records, so DEL undoes whatever a crashed ADD got to.
struct RdmaRecord {
  std::string device;         // its name when ADD found or created it
  int index = -1;             // the kernel's RDMA device index, -1 until known
  uint32_t port = 1;          // the port whose netdev is the pod interface
  bool created = false;       // a soft-RoCE device rdmanet created; DEL deletes it
  bool moved = false;         // moved into the pod netns; DEL moves it back
  std::string node_mode;      // the node's RDMA netns mode at ADD ("shared", "exclusive")
  std::string configfs_root;  // where ADD found configfs (for the rdma_cm group)
  nlohmann::json gids;        // rdma::GidReport::to_json() once known
};

struct AttachmentState {
  std::string network;
  std::string container_id;
  std::string ifname;
  std::string netns;
  uint64_t netns_cookie = 0;  // the pod netns's cookie at ADD; 0 when the kernel has none
  std::string mode;           // "netdev" | "macvlan"
  std::string phase;          // "adding" until ADD finished, then "added"
  DeviceRecord device;
  std::optional<VfRecord> vf;
  std::optional<RdmaRecord> rdma;
  std::string device_info_file;  // the CNIDeviceInfoFile ADD wrote; DEL removes it
  std::string config;            // the ADD's stdin, for IPAM DEL after config changes
  nlohmann::json result;         // the ADD result (1.1.0 encoding), once known

  nlohmann::json to_json() const;
  static Expected<AttachmentState> from_json(const nlohmann::json& doc, const std::string& where);
};

// The attachment's pod netns, if its path still names the namespace ADD used: a path that
// now names another namespace (a reused /proc/<pid>/ns/net, a netns recreated under the same
// name) is treated as gone, so DEL and reclaim never change links in somebody else's pod.
Expected<std::optional<netns::Netns>> open_pod_netns(const AttachmentState& state);

class StateStore {
 public:
  explicit StateStore(std::string root) : root_(std::move(root)) {}

  // Blocks until this process holds the device's lock.
  Expected<FileLock> lock_device(const std::string& key);

  Expected<std::optional<AttachmentState>> load(const std::string& network,
                                                const std::string& container_id,
                                                const std::string& ifname) const;
  Status save(const AttachmentState& state);
  Status remove(const AttachmentState& state);
  // Removes whatever is on disk of an attachment, also the temporary of a write that was
  // killed before the first state file landed (nothing on the node changed before that).
  Status forget(const std::string& network, const std::string& container_id,
                const std::string& ifname);

  // The attachment (network, container id, ifname) holding a device, if any.
  Expected<std::optional<AttachmentState>> holder(const std::string& key) const;
  Status set_holder(const std::string& key, const AttachmentState& state);
  Status clear_holder(const std::string& key, const AttachmentState& state);

  // Every attachment of a network (for GC).
  Expected<std::vector<AttachmentState>> list(const std::string& network) const;

  // The directory holds state: writable, creatable (for STATUS).
  Status check_writable();

 private:
  std::string attachment_path(const std::string& network, const std::string& container_id,
                              const std::string& ifname) const;
  std::string root_;
};

}  // namespace rdmanet::plugin
