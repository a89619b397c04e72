#include "cni/result.h"

#include <arpa/inet.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "cni/json_fields.h"
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

json encode_result(const Result& result, const std::string& version) {
  json out = json::object();
  out["cniVersion"] = version;
  if (!result.interfaces.empty()) {
    json ifaces = json::array();
    for (const auto& i : result.interfaces) {
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
      ifaces.push_back(std::move(j));
    }
    out["interfaces"] = std::move(ifaces);
  }
  if (!result.ips.empty()) {
    json ips = json::array();
    for (const auto& ip : result.ips) {
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
      ips.push_back(std::move(j));
    }
    out["ips"] = std::move(ips);
  }
  if (!result.routes.empty()) {
    json routes = json::array();
    for (const auto& r : result.routes) {
      json j = {{"dst", r.dst}};
      if (!r.gw.empty()) {
        j["gw"] = r.gw;
      }
      if (is_v1_1(version)) {
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
      }
      routes.push_back(std::move(j));
    }
    out["routes"] = std::move(routes);
  }
  // Like libcni, dns is always present, empty fields omitted.
  json dns = json::object();
  if (!result.dns.nameservers.empty()) {
    dns["nameservers"] = result.dns.nameservers;
  }
  if (!result.dns.domain.empty()) {
    dns["domain"] = result.dns.domain;
  }
  if (!result.dns.search.empty()) {
    dns["search"] = result.dns.search;
  }
  if (!result.dns.options.empty()) {
    dns["options"] = result.dns.options;
  }
  out["dns"] = std::move(dns);
  return out;
}

std::string encode_result_string(const Result& result, const std::string& version) {
  return encode_result(result, version).dump();
}

Expected<Dns> decode_dns(const json& doc, const std::string& where) {
  Dns dns;
  Fields f(doc, where);
  if (auto s = f.string_list("nameservers", &dns.nameservers); !s) {
    return std::move(s).error();
  }
  if (auto s = f.string("domain", &dns.domain); !s) {
    return std::move(s).error();
  }
  if (auto s = f.string_list("search", &dns.search); !s) {
    return std::move(s).error();
  }
  if (auto s = f.string_list("options", &dns.options); !s) {
    return std::move(s).error();
  }
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
  auto fail = [](Status s) { return std::move(s).error(); };

  std::vector<json> items;
  if (auto s = top.object_list("interfaces", &items); !s) {
    return fail(std::move(s));
  }
  for (size_t n = 0; n < items.size(); ++n) {
    Fields f(items[n], where + ".interfaces[" + std::to_string(n) + "]");
    Interface i;
    Status s = f.required_string("name", &i.name);
    if (s) {
      s = f.string("mac", &i.mac);
    }
    if (s) {
      s = f.integer("mtu", &i.mtu);
    }
    if (s) {
      s = f.string("sandbox", &i.sandbox);
    }
    if (s) {
      s = f.string("socketPath", &i.socket_path);
    }
    if (s) {
      s = f.string("pciID", &i.pci_id);
    }
    if (!s) {
      return fail(std::move(s));
    }
    result.interfaces.push_back(std::move(i));
  }

  if (auto s = top.object_list("ips", &items); !s) {
    return fail(std::move(s));
  }
  for (size_t n = 0; n < items.size(); ++n) {
    std::string here = where + ".ips[" + std::to_string(n) + "]";
    Fields f(items[n], here);
    IpConfig ip;
    std::string ip_version;
    int iface = -1;
    Status s = f.required_string("address", &ip.address);
    if (s) {
      s = f.string("gateway", &ip.gateway);
    }
    if (s) {
      s = f.string("version", &ip_version);
    }
    if (s && f.has("interface")) {
      s = f.integer("interface", &iface);
      ip.interface = iface;
    }
    if (!s) {
      return fail(std::move(s));
    }
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

  if (auto s = top.object_list("routes", &items); !s) {
    return fail(std::move(s));
  }
  for (size_t n = 0; n < items.size(); ++n) {
    std::string here = where + ".routes[" + std::to_string(n) + "]";
    Fields f(items[n], here);
    Route r;
    int table = 0;
    int scope = 0;
    Status s = f.required_string("dst", &r.dst);
    if (s) {
      s = f.string("gw", &r.gw);
    }
    if (s) {
      s = f.integer("mtu", &r.mtu);
    }
    if (s) {
      s = f.integer("advmss", &r.advmss);
    }
    if (s) {
      s = f.integer("priority", &r.priority);
    }
    if (s && f.has("table")) {
      s = f.integer("table", &table);
      r.table = table;
    }
    if (s && f.has("scope")) {
      s = f.integer("scope", &scope);
      r.scope = scope;
    }
    if (!s) {
      return fail(std::move(s));
    }
    if (!is_valid_cidr(r.dst)) {
      return Error(ErrorKind::kDecode, here + ".dst: invalid CIDR \"" + r.dst + "\"");
    }
    if (!r.gw.empty() && !is_valid_ip(r.gw)) {
      return Error(ErrorKind::kDecode, here + ".gw: invalid address \"" + r.gw + "\"");
    }
    result.routes.push_back(std::move(r));
  }

  if (doc.contains("dns") && !doc["dns"].is_null()) {
    auto dns = decode_dns(doc["dns"], where + ".dns");
    if (!dns) {
      return std::move(dns).error();
    }
    result.dns = std::move(*dns);
  }
  return result;
}

}  // namespace rdmanet::cni
