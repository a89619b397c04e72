// What the store (store.h) keeps per address and per attachment: a lease names
// the attachment holding an address, a record lists the addresses of an
// attachment. Both are small JSON files; these are their contents.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ipam/ip.h"

namespace rdmanet::ipam {

// The attachment a lease belongs to.
struct Owner {
  std::string container_id;
  std::string ifname;
  bool operator==(const Owner&) const = default;
  std::string str() const { return container_id + "/" + ifname; }
};

struct Lease {
  IpAddr ip;
  Owner owner;
  std::string netns;  // CNI_NETNS at ADD
  std::string pod_namespace;
  std::string pod_name;
  std::string pod_uid;
  bool readable = true;  // false: the file exists but cannot be parsed
};

struct Record {
  Owner owner;
  std::string netns;
  std::vector<IpAddr> ips;
};

// A lease file's content, and back. Text that is not the lease of `ip` (torn by a
// crash, or another address's) gives a Lease with readable == false.
std::string format_lease(const Lease& lease);
Lease parse_lease(const IpAddr& ip, const std::string& text);

// A record file's content, and back; nullopt for text that is not a record.
std::string format_record(const Record& record);
std::optional<Record> parse_record(const std::string& text);

// The file name of an attachment's record:
// "<fnv64 of both ids>-<container id, first 64 chars>-<ifname in hex>", so no byte
// of an interface name can form a path, and a long container id still fits.
std::string record_name(const Owner& owner);

}  // namespace rdmanet::ipam
