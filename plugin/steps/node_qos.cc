#include "plugin/steps/node_qos.h"

#include "base/hex.h"
#include "netns/dcb.h"
#include "plugin/attachment.h"
#include "plugin/steps/vf.h"

namespace rdmanet::plugin {

Status check_node_qos(Attachment& a) {
  const PluginConf& conf = a.conf();
  const HostDevice& dev = a.device();
  if (conf.dcb.empty()) {
    return ok_status();
  }
  const std::string& pf = dev.vf ? dev.pf_name : dev.link.name;
  // One PF's DCB is read and written by every pod on it: one at a time.
  TRY_ASSIGN(auto lock,
             a.store().lock(dev.vf ? pf_lock_key(dev.vf->pf_pci) : "pf-name-" + hex(pf)));
  TRY_ASSIGN(auto rtnl, netns::Rtnl::open());
  if (conf.dcb_apply) {
    return netns::apply_dcb(rtnl, pf, conf.dcb).with_context("roce.dcb (policy apply)");
  }
  TRY_ASSIGN(auto have, netns::read_dcb(rtnl, pf).with_context("roce.dcb (policy verify)"));
  auto s = netns::verify_dcb(have, conf.dcb, pf);
  if (!s) {
    Error e = std::move(s).error();
    return e.append(" (set the PF's DCB, or use roce.dcb.policy \"apply\")");
  }
  return s;
}

}  // namespace rdmanet::plugin
