// The rendezvous wire format: every message survives a round trip field for
// field, and every way of breaking a frame (cutting it, padding it, forging
// counts, other versions, unknown types, flipped bytes) is refused with a
// reason instead of crashing or allocating wildly.
#include "core/comm/wire.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/util/rng.h"

using namespace dtrain;
using namespace dtrain::wire;

namespace {

std::vector<Body> oneOfEach() {
  JoinRequest j;
  j.job_id = "job";
  j.token = "tok";
  j.host = "h\xc3\xa9te";
  j.node = 2;
  j.slot = 3;
  j.pid = 4242;
  j.local_devices = 8;
  Set set;
  set.generation = 9;
  set.key = "k";
  set.value = Bytes{0, 1, 255};
  Get get;
  get.generation = 9;
  get.key = "key";
  get.timeout_ms = 1234;
  Wait wait;
  wait.generation = 9;
  wait.keys = {"a", "", "ccc"};
  wait.timeout_ms = 7;
  Add add;
  add.generation = 1;
  add.key = "n";
  add.delta = -5;
  Check check;
  check.generation = 2;
  check.key = "c";
  Barrier barrier;
  barrier.generation = 3;
  barrier.name = "epoch-1";
  barrier.timeout_ms = 60000;
  Heartbeat beat;
  beat.generation = UINT64_MAX;
  Abort abort;
  abort.generation = 4;
  abort.reason = "out of memory";
  Leave leave;
  leave.generation = 5;
  Welcome welcome;
  welcome.membership.rank = 1;
  welcome.membership.world_size = 2;
  welcome.membership.generation = 6;
  welcome.membership.peers = {{"a", 0, 0, 10, 1}, {"b", 1, 0, 11, 2}};
  AbortNotice notice;
  notice.origin_rank = 3;
  notice.origin_host = "hostB";
  notice.reason = "lost";
  ReportLost lost;
  lost.job_id = "job";
  lost.token = "t";
  lost.node = 1;
  lost.pid = 4242;
  lost.why = "killed";
  RegroupNotice regroup;
  regroup.generation = 7;
  regroup.reason = "lost rank 3";
  return {Join{j},
          set,
          get,
          wait,
          add,
          check,
          barrier,
          beat,
          abort,
          leave,
          lost,
          welcome,
          Refused{"no"},
          Ok{},
          Value{Bytes{7, 8}},
          Number{INT64_MIN},
          Flag{true},
          notice,
          regroup};
}

// Field-by-field equality through a second encoding: encode is deterministic,
// so equal frames mean equal messages.
void checkRoundTrip(const Body& body, uint64_t id) {
  std::string frame = encode(id, body);
  Message m = decode(frame.data(), frame.size());
  CHECK(m.request_id == id);
  CHECK(typeOf(m.body) == typeOf(body));
  CHECK(encode(id, m.body) == frame);
}

std::string refusalOf(const std::string& frame) {
  try {
    decode(frame.data(), frame.size());
  } catch (const WireError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("wire: every message type survives a round trip") {
  uint64_t id = 1;
  for (const Body& b : oneOfEach()) checkRoundTrip(b, id++ * 0x0101010101ULL);
}

TEST_CASE("wire: the layout is the documented one") {
  Get get;
  get.generation = 0x0102030405060708ULL;
  get.key = "ab";
  get.timeout_ms = 0x11223344;
  std::string f = encode(0xAABBCCDDEEFF0011ULL, get);
  REQUIRE(f.size() == kHeaderBytes + 8 + 4 + 2 + 4);
  CHECK(f.compare(0, 4, "DTRZ") == 0);
  CHECK(static_cast<uint8_t>(f[4]) == kProtocolVersion);  // little-endian u16
  CHECK(static_cast<uint8_t>(f[5]) == 0);
  CHECK(static_cast<uint8_t>(f[6]) == static_cast<uint8_t>(MessageType::kGet));
  CHECK(static_cast<uint8_t>(f[7]) == 0x11);  // request id, low byte first
  CHECK(static_cast<uint8_t>(f[14]) == 0xAA);
  CHECK(static_cast<uint8_t>(f[15]) == 0x08);  // generation, low byte first
  CHECK(static_cast<uint8_t>(f[23]) == 2);     // key length
  CHECK(f.substr(27, 2) == "ab");
  CHECK(static_cast<uint8_t>(f[29]) == 0x44);

  Message m = decode(f.data(), f.size());
  const Get& back = std::get<Get>(m.body);
  CHECK(back.generation == 0x0102030405060708ULL);
  CHECK(back.key == "ab");
  CHECK(back.timeout_ms == 0x11223344u);
  std::string wf = encode(5, oneOfEach()[11]);
  Message wm = decode(wf.data(), wf.size());
  const Welcome& w = std::get<Welcome>(wm.body);
  REQUIRE(w.membership.peers.size() == 2);
  CHECK(w.membership.peers[1].host == "b");
  CHECK(w.membership.peers[1].pid == 11);
  CHECK(w.membership.peers[1].local_devices == 2);
}

TEST_CASE("wire: every truncation of every message is refused, naming the problem") {
  for (const Body& b : oneOfEach()) {
    std::string frame = encode(3, b);
    for (size_t n = 0; n < frame.size(); ++n) {
      std::string cut = frame.substr(0, n);
      std::string why = refusalOf(cut);
      INFO("type " << messageTypeName(typeOf(b)) << ", " << n << " of " << frame.size() << " bytes");
      CHECK(why.find("truncated") != std::string::npos);
    }
  }
}

TEST_CASE("wire: trailing bytes, wrong magic, other versions and unknown types are refused") {
  std::string frame = encode(1, Ok{});
  CHECK(refusalOf(frame + "x").find("1 unexpected bytes after the last field") != std::string::npos);

  std::string magic = frame;
  magic[0] = 'X';
  CHECK(refusalOf(magic).find("does not start with \"DTRZ\"") != std::string::npos);

  std::string version = frame;
  version[4] = 7;
  CHECK(refusalOf(version).find("protocol version 7") != std::string::npos);
  Header h = decodeHeader(version.data(), version.size());
  CHECK(h.version == 7);
  CHECK(h.request_id == 1);

  std::string unknown = frame;
  unknown[6] = static_cast<char>(200);
  CHECK(refusalOf(unknown).find("unknown message type 200") != std::string::npos);

  std::string flag = encode(1, Flag{true});
  flag.back() = 7;
  CHECK(refusalOf(flag).find("neither 0 nor 1") != std::string::npos);
}

TEST_CASE("wire: forged lengths and counts are refused before anything is allocated") {
  Wait wait;
  wait.keys = {"a"};
  std::string f = encode(1, wait);
  // The key count sits after the header and the generation: claim 4 billion keys.
  std::memset(&f[kHeaderBytes + 8], 0xff, 4);
  CHECK(refusalOf(f).find("keys says 4294967295 entries") != std::string::npos);

  Set set;
  set.key = "k";
  std::string s = encode(1, set);
  std::memset(&s[kHeaderBytes + 8], 0xff, 4);  // key length
  CHECK(refusalOf(s).find("field 'key' needs 4294967295 bytes") != std::string::npos);

  Welcome w;
  w.membership.peers.resize(1);
  std::string wf = encode(1, w);
  std::memset(&wf[kHeaderBytes + 16], 0xff, 4);  // peer count
  CHECK(refusalOf(wf).find("peers says") != std::string::npos);

  std::string huge(kMaxMessageBytes + 1, 'x');
  std::memcpy(&huge[0], encode(1, Ok{}).data(), kHeaderBytes);
  CHECK(refusalOf(huge).find("oversized message") != std::string::npos);
}

TEST_CASE("wire: random corruption decodes or is refused, never anything else") {
  Rng rng(17);
  int refused = 0, decoded = 0;
  for (const Body& b : oneOfEach()) {
    std::string frame = encode(9, b);
    for (int trial = 0; trial < 300; ++trial) {
      std::string bad = frame;
      int flips = 1 + static_cast<int>(rng.below(4));
      for (int i = 0; i < flips; ++i) bad[rng.below(bad.size())] = static_cast<char>(rng.below(256));
      try {
        decode(bad.data(), bad.size());
        ++decoded;
      } catch (const WireError&) {
        ++refused;
      }
    }
  }
  CHECK(refused > 0);
  CHECK(decoded > 0);  // flips inside strings and numbers still make valid messages
}
