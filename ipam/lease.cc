#include "ipam/lease.h"

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/hex.h"
#include "base/json_fields.h"

namespace rdmanet::ipam {

using nlohmann::json;

namespace {

std::string str_field(const json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// JSON holds UTF-8 only; an ifname may hold any byte libcni allows, so it is
// stored in hex too ("ifname" stays for people reading the file).
void put_owner(json* doc, const Owner& owner) {
  (*doc)["containerID"] = owner.container_id;
  (*doc)["ifname"] = owner.ifname;
  (*doc)["ifnameHex"] = hex(owner.ifname);
}

Owner get_owner(const json& doc) {
  return {str_field(doc, "containerID"), unhex(str_field(doc, "ifnameHex"))};
}

std::string dump(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string format_lease(const Lease& lease) {
  json doc = {{"ip", lease.ip.str()}, {"netns", lease.netns}};
  put_owner(&doc, lease.owner);
  if (!lease.pod_namespace.empty()) {
    doc["podNamespace"] = lease.pod_namespace;
  }
  if (!lease.pod_name.empty()) {
    doc["podName"] = lease.pod_name;
  }
  if (!lease.pod_uid.empty()) {
    doc["podUID"] = lease.pod_uid;
  }
  return dump(doc);
}

Lease parse_lease(const IpAddr& ip, const std::string& text) {
  Lease lease;
  lease.ip = ip;
  json doc = parse_json(text);
  if (!doc.is_object() || str_field(doc, "ip") != ip.str() || get_owner(doc).container_id.empty() ||
      get_owner(doc).ifname.empty()) {
    lease.readable = false;
    return lease;
  }
  lease.owner = get_owner(doc);
  lease.netns = str_field(doc, "netns");
  lease.pod_namespace = str_field(doc, "podNamespace");
  lease.pod_name = str_field(doc, "podName");
  lease.pod_uid = str_field(doc, "podUID");
  return lease;
}

std::string format_record(const Record& record) {
  json ips = json::array();
  for (const auto& ip : record.ips) {
    ips.push_back(ip.str());
  }
  json doc = {{"netns", record.netns}, {"ips", ips}};
  put_owner(&doc, record.owner);
  return dump(doc);
}

std::optional<Record> parse_record(const std::string& text) {
  json doc = parse_json(text);
  if (!doc.is_object() || !doc.contains("ips") || !doc["ips"].is_array()) {
    return std::nullopt;
  }
  Record r;
  r.owner = get_owner(doc);
  r.netns = str_field(doc, "netns");
  for (const auto& item : doc["ips"]) {
    if (!item.is_string()) {
      return std::nullopt;
    }
    auto ip = parse_ip(item.get<std::string>());
    if (!ip) {
      return std::nullopt;
    }
    r.ips.push_back(*ip);
  }
  if (r.owner.container_id.empty() || r.owner.ifname.empty()) {
    return std::nullopt;
  }
  return r;
}

std::string record_name(const Owner& owner) {
  std::string key = owner.container_id + '\0' + owner.ifname;
  std::array<char, 17> h{};
  snprintf(
      h.data(), h.size(), "%016llx",
      static_cast<unsigned long long>(fnv1a64(key)));  // NOLINT(cppcoreguidelines-pro-type-vararg)
  // The container id is validated ([a-zA-Z0-9][a-zA-Z0-9_.-]*) but may be long;
  // the ifname is hex-encoded. Both are checked against the content anyway.
  return std::string(h.data()) + "-" + owner.container_id.substr(0, 64) + "-" + hex(owner.ifname);
}

}  // namespace rdmanet::ipam
