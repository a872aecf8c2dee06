#include "core/config/local_node.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>

#include "core/errors.h"

namespace dtrain {
namespace {

// The numeric text of an address; IPv4-mapped IPv6 (::ffff:10.0.0.1) as IPv4,
// so a dual-stack answer compares equal to the interface's IPv4 address.
std::string numericAddress(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    if (!inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf)) return "";
  } else if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      if (!inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], buf, sizeof buf)) return "";
    } else if (!inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf)) {
      return "";
    }
  } else {
    return "";
  }
  return buf;
}

bool isIpv4(const std::string& a) { return a.find(':') == std::string::npos; }

// Each once, IPv4 before IPv6, each family in text order: a stable list for messages.
void sortAddresses(std::vector<std::string>& addresses) {
  std::sort(addresses.begin(), addresses.end(), [](const std::string& a, const std::string& b) {
    if (isIpv4(a) != isIpv4(b)) return isIpv4(a);
    return a < b;
  });
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool matchesName(const std::string& address, const std::string& name) {
  if (name.empty()) return false;
  const std::string a = lower(address);
  const std::string n = lower(name);
  return a == n || a == n.substr(0, n.find('.'));
}

bool matches(const ClusterHost& host, const HostIdentity& self) {
  if (matchesName(host.address, self.name)) return true;
  for (const std::string& resolved : resolveHostAddresses(host.address))
    if (std::find(self.addresses.begin(), self.addresses.end(), resolved) != self.addresses.end())
      return true;
  return false;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

std::string describeSelf(const HostIdentity& self) {
  return "this host (addresses " + (self.addresses.empty() ? std::string("none") : join(self.addresses)) +
         "; name " + (self.name.empty() ? std::string("unknown") : self.name) + ")";
}

}  // namespace

HostIdentity localHostIdentity() {
  HostIdentity self;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* it = list; it; it = it->ifa_next) {
      if (!it->ifa_addr) continue;
      std::string a = numericAddress(it->ifa_addr);
      if (!a.empty()) self.addresses.push_back(a);
    }
    freeifaddrs(list);
  }
  sortAddresses(self.addresses);
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) == 0) self.name = name;
  return self;
}

std::vector<std::string> resolveHostAddresses(const std::string& host) {
  std::vector<std::string> out;
  if (host.empty()) return out;
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* it = res; it; it = it->ai_next) {
    std::string a = numericAddress(it->ai_addr);
    if (!a.empty()) out.push_back(a);
  }
  freeaddrinfo(res);
  sortAddresses(out);
  return out;
}

int findLocalNode(const ClusterSection& cluster, const HostIdentity& self) {
  if (cluster.hosts.empty()) throw ConfigError("[cluster] lists no hosts, so this host cannot be among them");
  std::vector<size_t> found;
  for (size_t i = 0; i < cluster.hosts.size(); ++i)
    if (matches(cluster.hosts[i], self)) found.push_back(i);
  if (found.size() == 1) return static_cast<int>(found[0]);
  if (found.empty()) {
    std::vector<std::string> listed;
    for (const ClusterHost& h : cluster.hosts) listed.push_back(h.address);
    throw ConfigError(describeSelf(self) + " is not among the [cluster] hosts (" + join(listed) +
                      "); pass --node N");
  }
  std::vector<std::string> which;
  for (size_t i : found) which.push_back("hosts[" + std::to_string(i) + "] " + cluster.hosts[i].address);
  throw ConfigError(describeSelf(self) + " matches several [cluster] hosts (" + join(which) +
                    "); pass --node N to say which one it is");
}

int findLocalNode(const ClusterSection& cluster) { return findLocalNode(cluster, localHostIdentity()); }

}  // namespace dtrain
