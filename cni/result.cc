#include "cni/result.h"

#include <arpa/inet.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "base/json_fields.h"
#include "cni/version.h"

namespace rdmanet::cni {

using nlohmann::json;

namespace {

bool has_ip_version_field(const std::string& version) {
  // 0.3.x and 0.4.0 results carry "version": "4"|"6" on each IP; 1.x do not.
  return version.rfind("0.", 0) == 0;
}

bool is_v1_1(const std::string& version) { return version == "1.1.0"; }

}  // namespace

bool is_valid_ip(const std::string& text) {
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

bool is_valid_cidr(const std::string& text) {
  size_t slash = text.find('/');
  if (slash == std::string::npos) {
    return false;
  }
  std::string ip = text.substr(0, slash);
  std::string prefix = text.substr(slash + 1);
  unsigned char buf[16];
  int max_prefix = 0;
  if (inet_pton(AF_INET, ip.c_str(), buf) == 1) {
    max_prefix = 32;
  } else if (inet_pton(AF_INET6, ip.c_str(), buf) == 1) {
    max_prefix = 128;
  } else {
    return false;
  }
  int len = -1;
  auto [ptr, ec] = std::from_chars(prefix.data(), prefix.data() + prefix.size(), len);
  return ec == std::errc() && ptr == prefix.data() + prefix.size() && !prefix.empty() && len >= 0 &&
         len <= max_prefix;
}

bool IpConfig::is_ipv6() const { return address.find(':') != std::string::npos; }

bool Dns::empty() const {
  return nameservers.empty() && domain.empty() && search.empty() && options.empty();
}

namespace {

// Each element as the result of `version` has it: fields a version does not know are left
// out, as are empty ones.
json encode_interface(const Interface& i, const std::string& version) {
  json j = {{"name", i.name}};
  if (!i.mac.empty()) {
    j["mac"] = i.mac;
  }
  if (is_v1_1(version) && i.mtu != 0) {
    j["mtu"] = i.mtu;
  }
  if (!i.sandbox.empty()) {
    j["sandbox"] = i.sandbox;
  }
  if (is_v1_1(version) && !i.socket_path.empty()) {
    j["socketPath"] = i.socket_path;
  }
  if (is_v1_1(version) && !i.pci_id.empty()) {
    j["pciID"] = i.pci_id;
  }
  return j;
}

json encode_ip(const IpConfig& ip, const std::string& version) {
  json j = json::object();
  if (has_ip_version_field(version)) {
    j["version"] = ip.is_ipv6() ? "6" : "4";
  }
  if (ip.interface) {
    j["interface"] = *ip.interface;
  }
  j["address"] = ip.address;
  if (!ip.gateway.empty()) {
    j["gateway"] = ip.gateway;
  }
  return j;
}

json encode_route(const Route& r, const std::string& version) {
  json j = {{"dst", r.dst}};
  if (!r.gw.empty()) {
    j["gw"] = r.gw;
  }
  if (!is_v1_1(version)) {
    return j;
  }
  if (r.mtu != 0) {
    j["mtu"] = r.mtu;
  }
  if (r.advmss != 0) {
    j["advmss"] = r.advmss;
  }
  if (r.priority != 0) {
    j["priority"] = r.priority;
  }
  if (r.table) {
    j["table"] = *r.table;
  }
  if (r.scope) {
    j["scope"] = *r.scope;
  }
  return j;
}

json encode_dns(const Dns& dns) {
  json j = json::object();
  if (!dns.nameservers.empty()) {
    j["nameservers"] = dns.nameservers;
  }
  if (!dns.domain.empty()) {
    j["domain"] = dns.domain;
  }
  if (!dns.search.empty()) {
    j["search"] = dns.search;
  }
  if (!dns.options.empty()) {
    j["options"] = dns.options;
  }
  return j;
}

// out[key]: `items`, each encoded for `version`; left out when there are none.
template <class T>
void put_list(json& out, const char* key, const std::vector<T>& items, const std::string& version,
              json (*encode)(const T&, const std::string&)) {
  if (items.empty()) {
    return;
  }
  json list = json::array();
  for (const auto& item : items) {
    list.push_back(encode(item, version));
  }
  out[key] = std::move(list);
}

}  // namespace

json encode_result(const Result& result, const std::string& version) {
  json out = json::object();
  out["cniVersion"] = version;
  put_list(out, "interfaces", result.interfaces, version, encode_interface);
  put_list(out, "ips", result.ips, version, encode_ip);
  put_list(out, "routes", result.routes, version, encode_route);
  // Like libcni, dns is always present, empty fields omitted.
  out["dns"] = encode_dns(result.dns);
  return out;
}

std::string encode_result_string(const Result& result, const std::string& version) {
  return encode_result(result, version).dump();
}

Expected<Dns> decode_dns(const json& doc, const std::string& where) {
  Dns dns;
  Fields f(doc, where);
  f.string_list("nameservers", &dns.nameservers).string("domain", &dns.domain);
  f.string_list("search", &dns.search).string_list("options", &dns.options);
  TRY(f.status());
  for (const auto& ns : dns.nameservers) {
    if (!is_valid_ip(ns)) {
      return Error(ErrorKind::kDecode, where + ".nameservers: invalid address \"" + ns + "\"");
    }
  }
  return dns;
}

Expected<Result> decode_result(const json& doc, const std::string& version,
                               const std::string& where) {
  if (!is_supported(version)) {
    return Error(ErrorKind::kIncompatibleVersion,
                 where + ": unsupported result version \"" + version + "\"");
  }
  if (!doc.is_object()) {
    return Error(ErrorKind::kDecode, where + " must be a JSON object");
  }
  Result result;
  Fields top(doc, where);

  std::vector<json> items;
  TRY(top.object_list("interfaces", &items).status());
  for (size_t n = 0; n < items.size(); ++n) {
    Fields f(items[n], where + ".interfaces[" + std::to_string(n) + "]");
    Interface i;
    f.required_string("name", &i.name).string("mac", &i.mac).integer("mtu", &i.mtu);
    f.string("sandbox", &i.sandbox).string("socketPath", &i.socket_path);
    f.string("pciID", &i.pci_id);
    TRY(f.status());
    result.interfaces.push_back(std::move(i));
  }

  TRY(top.object_list("ips", &items).status());
  for (size_t n = 0; n < items.size(); ++n) {
    std::string here = where + ".ips[" + std::to_string(n) + "]";
    Fields f(items[n], here);
    IpConfig ip;
    std::string ip_version;
    f.required_string("address", &ip.address).string("gateway", &ip.gateway);
    f.string("version", &ip_version).integer("interface", &ip.interface);
    TRY(f.status());
    if (!is_valid_cidr(ip.address)) {
      return Error(ErrorKind::kDecode, here + ".address: invalid CIDR \"" + ip.address + "\"");
    }
    if (!ip.gateway.empty() && !is_valid_ip(ip.gateway)) {
      return Error(ErrorKind::kDecode, here + ".gateway: invalid address \"" + ip.gateway + "\"");
    }
    if (has_ip_version_field(version) && !ip_version.empty() &&
        ip_version != (ip.is_ipv6() ? "6" : "4")) {
      return Error(ErrorKind::kDecode,
                   here + ".version \"" + ip_version + "\" does not match address " + ip.address);
    }
    if (ip.interface && (*ip.interface < 0 || *ip.interface >= int(result.interfaces.size()))) {
      return Error(ErrorKind::kDecode,
                   here + ".interface: index " + std::to_string(*ip.interface) + " out of range");
    }
    result.ips.push_back(std::move(ip));
  }

  TRY(top.object_list("routes", &items).status());
  for (size_t n = 0; n < items.size(); ++n) {
    std::string here = where + ".routes[" + std::to_string(n) + "]";
    Fields f(items[n], here);
    Route r;
    f.required_string("dst", &r.dst).string("gw", &r.gw).integer("mtu", &r.mtu);
    f.integer("advmss", &r.advmss).integer("priority", &r.priority);
    f.integer("table", &r.table).integer("scope", &r.scope);
    TRY(f.status());
    if (!is_valid_cidr(r.dst)) {
      return Error(ErrorKind::kDecode, here + ".dst: invalid CIDR \"" + r.dst + "\"");
    }
    if (!r.gw.empty() && !is_valid_ip(r.gw)) {
      return Error(ErrorKind::kDecode, here + ".gw: invalid address \"" + r.gw + "\"");
    }
    result.routes.push_back(std::move(r));
  }

  if (doc.contains("dns") && !doc["dns"].is_null()) {
    TRY_ASSIGN(result.dns, decode_dns(doc["dns"], where + ".dns"));
  }
  return result;
}

}  // namespace rdmanet::cni
