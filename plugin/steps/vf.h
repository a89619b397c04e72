// What the two SR-IOV VF steps (vf_settings.h, vf_guids.h) share: the record of the VF they
// change through its PF (the PF, the VF's index and PCI address, the settings it had before),
// the per-PF lock that serialises changes to one PF's VFs, and finding the PF and the VF again
// on DEL, by PCI address (names change across reboots).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/error.h"
#include "netns/link.h"
#include "netns/rtnl.h"
#include "netns/vf.h"

namespace rdmanet::plugin {

struct VfRecord {
  std::string pf_pci;
  std::string pf_name;
  std::string sysfs_root = "/sys";
  std::string vf_pci;
  int vf = 0;
  netns::VfConfig original;  // the values ADD replaced, only the attributes it changed

  nlohmann::json to_json() const;
  // `step` names the step in errors (kState).
  static Expected<VfRecord> from_json(const nlohmann::json& doc, const std::string& step);
};

// The lock of a PF's VF settings (plugin/store.h).
std::string pf_lock_key(const std::string& pf_pci);

// Only the attributes of `wanted` whose value the VF does not have yet.
netns::VfConfig changes_from(const netns::VfState& current, const netns::VfConfig& wanted);

// The PF of a recorded VF and the VF as it reports it; std::nullopt when the PF or the VF is
// gone, and their settings with it.
struct PfAndVf {
  netns::LinkInfo pf;
  netns::VfState vf;
};
Expected<std::optional<PfAndVf>> find_pf_and_vf(netns::Rtnl& rtnl, const VfRecord& r);

}  // namespace rdmanet::plugin
