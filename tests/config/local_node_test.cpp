// Finding which [cluster] host this machine is.
#include "core/config/local_node.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "tests/config/config_test_util.h"

using dtrain::ClusterHost;
using dtrain::ClusterSection;
using dtrain::findLocalNode;
using dtrain::HostIdentity;
using dtrain::test::configErrorOf;

namespace {

ClusterSection hostsOf(const std::vector<std::string>& addresses) {
  ClusterSection c;
  c.present = true;
  for (const std::string& a : addresses) c.hosts.push_back(ClusterHost{a, 1, {}});
  return c;
}

const HostIdentity kSelf{{"10.0.0.5", "127.0.0.1", "::1"}, "worker5.example.org"};

}  // namespace

TEST_CASE("this machine's identity has its loopback address, and numeric addresses resolve to themselves") {
  HostIdentity self = dtrain::localHostIdentity();
  CHECK(std::count(self.addresses.begin(), self.addresses.end(), "127.0.0.1") == 1);
  CHECK_FALSE(self.name.empty());
  CHECK(dtrain::resolveHostAddresses("127.0.0.1") == std::vector<std::string>{"127.0.0.1"});
  CHECK(dtrain::resolveHostAddresses("::ffff:10.1.2.3") == std::vector<std::string>{"10.1.2.3"});
  CHECK(dtrain::resolveHostAddresses("").empty());
}

TEST_CASE("the one matching host is this node") {
  CHECK(findLocalNode(hostsOf({"192.0.2.1", "127.0.0.1", "192.0.2.3"})) == 1);
  CHECK(findLocalNode(hostsOf({"192.0.2.1", "10.0.0.5"}), kSelf) == 1);
  CHECK(findLocalNode(hostsOf({"::1", "192.0.2.1"}), kSelf) == 0);
  // By host name, whole or its first label, in any case.
  CHECK(findLocalNode(hostsOf({"192.0.2.1", "WORKER5"}), kSelf) == 1);
  CHECK(findLocalNode(hostsOf({"worker5.example.org", "192.0.2.2"}), kSelf) == 0);
  // This machine's own name, whatever it is here.
  HostIdentity self = dtrain::localHostIdentity();
  CHECK(findLocalNode(hostsOf({"192.0.2.1", self.name})) == 1);
}

TEST_CASE("no matching host asks for --node, listing what this host is") {
  CHECK(configErrorOf([] {
          findLocalNode(hostsOf({"192.0.2.1", "192.0.2.2"}), kSelf);
        }) ==
        "this host (addresses 10.0.0.5, 127.0.0.1, ::1; name worker5.example.org) is not among the [cluster] "
        "hosts (192.0.2.1, 192.0.2.2); pass --node N");
  CHECK(
      configErrorOf([] { findLocalNode(hostsOf({"192.0.2.1"}), HostIdentity{}); }) ==
      "this host (addresses none; name unknown) is not among the [cluster] hosts (192.0.2.1); pass --node N");
  // On this machine: TEST-NET-1 is nobody's address.
  std::string msg = configErrorOf([] { findLocalNode(hostsOf({"192.0.2.1"})); });
  CHECK(msg.rfind("this host (addresses ", 0) == 0);
  CHECK(msg.find("127.0.0.1") != std::string::npos);
  CHECK(msg.find("; name " + dtrain::localHostIdentity().name + ")") != std::string::npos);
  CHECK(msg.substr(msg.find(") is not")) == ") is not among the [cluster] hosts (192.0.2.1); pass --node N");
}

TEST_CASE("several matching hosts ask for --node") {
  CHECK(configErrorOf([] {
          findLocalNode(hostsOf({"10.0.0.5", "192.0.2.1", "worker5"}), kSelf);
        }) ==
        "this host (addresses 10.0.0.5, 127.0.0.1, ::1; name worker5.example.org) matches several [cluster] "
        "hosts (hosts[0] 10.0.0.5, hosts[2] worker5); pass --node N to say which one it is");
  std::string msg = configErrorOf([] { findLocalNode(hostsOf({"127.0.0.1", "localhost"})); });
  CHECK(
      msg.find(" matches several [cluster] hosts (hosts[0] 127.0.0.1, hosts[1] localhost); pass --node N to "
               "say which one it is") != std::string::npos);
  CHECK(configErrorOf([] { findLocalNode(ClusterSection{}); }) ==
        "[cluster] lists no hosts, so this host cannot be among them");
}
