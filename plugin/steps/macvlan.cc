#include "plugin/steps/macvlan.h"

#include "base/json_fields.h"
#include "netns/link.h"
#include "netns/link_identity.h"
#include "plugin/attachment.h"
#include "plugin/steps/dying_netns.h"

namespace rdmanet::plugin {

using netns::LinkInfo;
using netns::Rtnl;
using nlohmann::json;

namespace {

// What the macvlan step records: the child's name, its parent's ifindex in the host and, once
// known, its own ifindex in the pod (records of rdmanet 0.1 have the name alone).
struct MacvlanRecord {
  static constexpr StepKind kKind = StepKind::kMacvlan;
  std::string name;
  int parent_index = 0;
  int index = 0;

  json to_json() const {
    json doc = {{"name", name}, {"parentIndex", parent_index}};
    if (index != 0) {
      doc["index"] = index;
    }
    return doc;
  }
  static Expected<MacvlanRecord> from_json(const json& step) {
    MacvlanRecord r;
    Fields f(step, "macvlan", ErrorKind::kState);
    f.required_string("name", &r.name).integer("parentIndex", &r.parent_index);
    f.integer("index", &r.index);
    TRY(f.status());
    TRY(check_recorded_link_name(r.name, "macvlan.name"));
    return r;
  }
};

// A macvlan child is ours when its parent is the host device: no link a pod makes can have
// a parent in the host netns.
netns::LinkIdentity macvlan_identity(int parent_index) {
  netns::LinkIdentity id;
  id.kind = "macvlan";
  id.host_peer = parent_index;
  return id;
}

// The child in the pod netns (the socket's): the recorded one among the children of its
// parent, or the only one (renamed by the pod); none when it is gone. Several and none of
// them recorded: kState, nothing deleted.
Expected<std::optional<LinkInfo>> find_child(Rtnl& rtnl, const Attachment& a,
                                             const MacvlanRecord& r) {
  if (r.parent_index == 0) {
    // A record of rdmanet 0.1: by name and kind, as it did.
    auto link = netns::find_link_by_name(rtnl, r.name);
    if (!link && link.error().kind() != ErrorKind::kDeviceNotFound) {
      return std::move(link).error();
    }
    return link && link->kind == "macvlan" ? std::optional<LinkInfo>(std::move(*link))
                                           : std::optional<LinkInfo>();
  }
  TRY_ASSIGN(auto children,
             netns::find_links(rtnl, *a.pod(), a.host(), macvlan_identity(r.parent_index)));
  for (auto& child : children) {
    if ((r.index != 0 && child.index == r.index) || (r.index == 0 && child.name == r.name)) {
      return std::optional<LinkInfo>(std::move(child));
    }
  }
  if (children.size() == 1) {
    return std::optional<LinkInfo>(std::move(children.front()));
  }
  if (!children.empty()) {
    return Error(ErrorKind::kState, "macvlan " + r.name + ": " + std::to_string(children.size()) +
                                        " children of its parent in the pod, none of them "
                                        "recorded as this attachment's; none is deleted");
  }
  return std::optional<LinkInfo>();  // gone (or moved by the pod into a netns that dies with it)
}

}  // namespace

Status create_macvlan(Attachment& a) {
  if (a.rec().mode != Mode::kMacvlan) {
    return ok_status();
  }
  const PluginConf& conf = a.conf();
  MacvlanRecord made{.name = a.rec().ifname, .parent_index = a.device().link.index};
  TRY(a.record(made));
  TRY_ASSIGN(auto rtnl, Rtnl::open());
  netns::MacvlanSpec spec;
  spec.name = made.name;
  spec.parent_index = made.parent_index;
  spec.mode = conf.macvlan_mode;
  spec.target = &*a.pod();
  spec.hwaddr = conf.mac;
  spec.mtu = conf.mtu;
  TRY(netns::create_macvlan(rtnl, spec).with_context("macvlan child of " + a.device().link.name));
  // Its ifindex, kept with the record from the next write on: several children of one
  // parent in one pod (two rails on one NIC) then stay apart whatever the pod renames.
  auto index = netns::in_netns(*a.pod(), [&]() -> Expected<int> {
    TRY_ASSIGN(auto pod_rtnl, Rtnl::open());
    TRY_ASSIGN(auto child, netns::find_link_by_name(pod_rtnl, spec.name));
    return child.index;
  });
  if (index) {
    made.index = *index;
    a.amend(made);
  }
  return ok_status();
}

Status delete_macvlan(Attachment& a, const json& recorded) {
  TRY_ASSIGN(MacvlanRecord r, MacvlanRecord::from_json(recorded));
  if (!a.pod()) {
    // The child dies with the netns, once the netns does: not while a process holds it.
    if (r.index == 0 || r.parent_index == 0) {
      return ok_status();
    }
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    return wait_until_released(
        a, rtnl, r.index, "macvlan",
        [&] {
          auto parent = netns::find_link_by_index(rtnl, r.parent_index);
          return "macvlan " + r.name + " (index " + std::to_string(r.index) + ")" +
                 (parent ? " of " + parent->name : "");
        },
        r.parent_index);
  }
  return netns::in_netns(*a.pod(), [&]() -> Status {
    TRY_ASSIGN(auto rtnl, Rtnl::open());
    TRY_ASSIGN(auto child, find_child(rtnl, a, r));
    return child ? netns::delete_link(rtnl, *child) : ok_status();
  });
}

}  // namespace rdmanet::plugin
