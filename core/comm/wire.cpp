#include "core/comm/wire.h"

#include <cstring>
#include <type_traits>

namespace dtrain::wire {

namespace {

// Appends fixed-width little-endian integers and length-prefixed strings.
class Writer {
 public:
  Writer(MessageType type, uint64_t request_id) {
    out_.append(kMagic, sizeof(kMagic));
    u16(kProtocolVersion);
    u8(static_cast<uint8_t>(type));
    u64(request_id);
  }
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { little(v, 2); }
  void u32(uint32_t v) { little(v, 4); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void u64(uint64_t v) { little(v, 8); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void bytes(const void* data, size_t n) {
    u32(static_cast<uint32_t>(n));
    out_.append(static_cast<const char*>(data), n);
  }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  std::string take() { return std::move(out_); }

 private:
  void little(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

// Reads what Writer wrote; every read is checked against the bytes left and
// names its field when they run out.
class Reader {
 public:
  Reader(const void* data, size_t size) : p_(static_cast<const uint8_t*>(data)), left_(size) {}
  uint8_t u8(const char* field) { return static_cast<uint8_t>(little(field, 1)); }
  uint16_t u16(const char* field) { return static_cast<uint16_t>(little(field, 2)); }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(little(field, 4)); }
  int32_t i32(const char* field) { return static_cast<int32_t>(u32(field)); }
  uint64_t u64(const char* field) { return little(field, 8); }
  int64_t i64(const char* field) { return static_cast<int64_t>(u64(field)); }
  std::string str(const char* field) {
    size_t n = length(field);
    std::string s(reinterpret_cast<const char*>(p_), n);
    skip(n);
    return s;
  }
  Bytes bytes(const char* field) {
    size_t n = length(field);
    Bytes b(p_, p_ + n);
    skip(n);
    return b;
  }
  // A count of entries that each take at least `min_entry_bytes`: checked
  // before anything is reserved, so a forged count cannot allocate gigabytes.
  size_t count(const char* field, size_t min_entry_bytes) {
    uint32_t n = u32(field);
    if (static_cast<uint64_t>(n) * min_entry_bytes > left_)
      throw WireError(std::string("truncated message: ") + field + " says " + std::to_string(n) +
                      " entries but only " + std::to_string(left_) + " bytes follow");
    return n;
  }
  void expectEnd() const {
    if (left_ != 0) throw WireError(std::to_string(left_) + " unexpected bytes after the last field");
  }
  void skip(size_t n) {
    p_ += n;
    left_ -= n;
  }

 private:
  void need(const char* field, size_t n) const {
    if (left_ < n)
      throw WireError(std::string("truncated message: field '") + field + "' needs " + std::to_string(n) +
                      " bytes, " + std::to_string(left_) + " left");
  }
  size_t length(const char* field) {
    uint32_t n = u32(field);
    need(field, n);
    return n;
  }
  uint64_t little(const char* field, int n) {
    need(field, static_cast<size_t>(n));
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
    skip(static_cast<size_t>(n));
    return v;
  }
  const uint8_t* p_;
  size_t left_;
};

// Bytes of the smallest peer entry (an empty host name): bounds the peer count.
constexpr size_t kMinPeerBytes = 4 + 4 * 4;

void put(Writer& w, const GroupRequest& r) { w.u64(r.generation); }
void put(Writer& w, const Join& m) {
  const JoinRequest& r = m.request;
  w.str(r.job_id);
  w.str(r.token);
  w.str(r.host);
  w.i32(r.node);
  w.i32(r.slot);
  w.i32(r.pid);
  w.i32(r.local_devices);
}
void put(Writer& w, const ReportLost& m) {
  w.str(m.job_id);
  w.str(m.token);
  w.i32(m.node);
  w.i32(m.pid);
  w.str(m.why);
}
void put(Writer& w, const Set& m) {
  put(w, static_cast<const GroupRequest&>(m));
  w.str(m.key);
  w.bytes(m.value.data(), m.value.size());
}
void put(Writer& w, const Get& m) {
  put(w, static_cast<const GroupRequest&>(m));
  w.str(m.key);
  w.u32(m.timeout_ms);
}
void put(Writer& w, const Wait& m) {
  put(w, static_cast<const GroupRequest&>(m));
  w.u32(static_cast<uint32_t>(m.keys.size()));
  for (const std::string& k : m.keys) w.str(k);
  w.u32(m.timeout_ms);
}
void put(Writer& w, const Add& m) {
  put(w, static_cast<const GroupRequest&>(m));
  w.str(m.key);
  w.i64(m.delta);
}
void put(Writer& w, const Check& m) {
  put(w, static_cast<const GroupRequest&>(m));
  w.str(m.key);
}
void put(Writer& w, const Barrier& m) {
  put(w, static_cast<const GroupRequest&>(m));
  w.str(m.name);
  w.u32(m.timeout_ms);
}
void put(Writer& w, const Heartbeat& m) { put(w, static_cast<const GroupRequest&>(m)); }
void put(Writer& w, const Abort& m) {
  put(w, static_cast<const GroupRequest&>(m));
  w.str(m.reason);
}
void put(Writer& w, const Leave& m) { put(w, static_cast<const GroupRequest&>(m)); }
void put(Writer& w, const Welcome& m) {
  const Membership& g = m.membership;
  w.i32(g.rank);
  w.i32(g.world_size);
  w.u64(g.generation);
  w.u32(static_cast<uint32_t>(g.peers.size()));
  for (const PeerInfo& p : g.peers) {
    w.str(p.host);
    w.i32(p.node);
    w.i32(p.slot);
    w.i32(p.pid);
    w.i32(p.local_devices);
  }
}
void put(Writer& w, const Refused& m) { w.str(m.reason); }
void put(Writer&, const Ok&) {}
void put(Writer& w, const Value& m) { w.bytes(m.value.data(), m.value.size()); }
void put(Writer& w, const Number& m) { w.i64(m.value); }
void put(Writer& w, const Flag& m) { w.u8(m.value ? 1 : 0); }
void put(Writer& w, const AbortNotice& m) {
  w.i32(m.origin_rank);
  w.str(m.origin_host);
  w.str(m.reason);
}
void put(Writer& w, const RegroupNotice& m) {
  w.u64(m.generation);
  w.str(m.reason);
}

uint64_t generation(Reader& r) { return r.u64("generation"); }

Body readBody(MessageType type, Reader& r) {
  switch (type) {
    case MessageType::kJoin: {
      Join m;
      m.request.job_id = r.str("job_id");
      m.request.token = r.str("token");
      m.request.host = r.str("host");
      m.request.node = r.i32("node");
      m.request.slot = r.i32("slot");
      m.request.pid = r.i32("pid");
      m.request.local_devices = r.i32("local_devices");
      return m;
    }
    case MessageType::kSet: {
      Set m;
      m.generation = generation(r);
      m.key = r.str("key");
      m.value = r.bytes("value");
      return m;
    }
    case MessageType::kGet: {
      Get m;
      m.generation = generation(r);
      m.key = r.str("key");
      m.timeout_ms = r.u32("timeout_ms");
      return m;
    }
    case MessageType::kWait: {
      Wait m;
      m.generation = generation(r);
      size_t n = r.count("keys", 4);
      m.keys.reserve(n);
      for (size_t i = 0; i < n; ++i) m.keys.push_back(r.str("keys"));
      m.timeout_ms = r.u32("timeout_ms");
      return m;
    }
    case MessageType::kAdd: {
      Add m;
      m.generation = generation(r);
      m.key = r.str("key");
      m.delta = r.i64("delta");
      return m;
    }
    case MessageType::kCheck: {
      Check m;
      m.generation = generation(r);
      m.key = r.str("key");
      return m;
    }
    case MessageType::kBarrier: {
      Barrier m;
      m.generation = generation(r);
      m.name = r.str("name");
      m.timeout_ms = r.u32("timeout_ms");
      return m;
    }
    case MessageType::kHeartbeat: {
      Heartbeat m;
      m.generation = generation(r);
      return m;
    }
    case MessageType::kAbort: {
      Abort m;
      m.generation = generation(r);
      m.reason = r.str("reason");
      return m;
    }
    case MessageType::kLeave: {
      Leave m;
      m.generation = generation(r);
      return m;
    }
    case MessageType::kReportLost: {
      ReportLost m;
      m.job_id = r.str("job_id");
      m.token = r.str("token");
      m.node = r.i32("node");
      m.pid = r.i32("pid");
      m.why = r.str("why");
      return m;
    }
    case MessageType::kWelcome: {
      Welcome m;
      Membership& g = m.membership;
      g.rank = r.i32("rank");
      g.world_size = r.i32("world_size");
      g.generation = r.u64("generation");
      size_t n = r.count("peers", kMinPeerBytes);
      g.peers.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        PeerInfo p;
        p.host = r.str("peer host");
        p.node = r.i32("peer node");
        p.slot = r.i32("peer slot");
        p.pid = r.i32("peer pid");
        p.local_devices = r.i32("peer local_devices");
        g.peers.push_back(std::move(p));
      }
      return m;
    }
    case MessageType::kRefused:
      return Refused{r.str("reason")};
    case MessageType::kOk:
      return Ok{};
    case MessageType::kValue:
      return Value{r.bytes("value")};
    case MessageType::kNumber:
      return Number{r.i64("value")};
    case MessageType::kFlag: {
      uint8_t v = r.u8("value");
      if (v > 1) throw WireError("flag value " + std::to_string(v) + " is neither 0 nor 1");
      return Flag{v == 1};
    }
    case MessageType::kAbortNotice: {
      AbortNotice m;
      m.origin_rank = r.i32("origin_rank");
      m.origin_host = r.str("origin_host");
      m.reason = r.str("reason");
      return m;
    }
    case MessageType::kRegroupNotice: {
      RegroupNotice m;
      m.generation = r.u64("generation");
      m.reason = r.str("reason");
      return m;
    }
  }
  throw WireError("unknown message type " + std::to_string(static_cast<int>(type)));
}

}  // namespace

const char* messageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kJoin:
      return "join";
    case MessageType::kSet:
      return "set";
    case MessageType::kGet:
      return "get";
    case MessageType::kWait:
      return "wait";
    case MessageType::kAdd:
      return "add";
    case MessageType::kCheck:
      return "check";
    case MessageType::kBarrier:
      return "barrier";
    case MessageType::kHeartbeat:
      return "heartbeat";
    case MessageType::kAbort:
      return "abort";
    case MessageType::kLeave:
      return "leave";
    case MessageType::kReportLost:
      return "report of a lost worker";
    case MessageType::kWelcome:
      return "welcome";
    case MessageType::kRefused:
      return "refused";
    case MessageType::kOk:
      return "ok";
    case MessageType::kValue:
      return "value";
    case MessageType::kNumber:
      return "number";
    case MessageType::kFlag:
      return "flag";
    case MessageType::kAbortNotice:
      return "abort notice";
    case MessageType::kRegroupNotice:
      return "regroup notice";
  }
  return "unknown";
}

MessageType typeOf(const Body& body) {
  return std::visit([](const auto& m) { return std::decay_t<decltype(m)>::kType; }, body);
}

std::string encode(uint64_t request_id, const Body& body) {
  Writer w(typeOf(body), request_id);
  std::visit([&](const auto& m) { put(w, m); }, body);
  return w.take();
}

Header decodeHeader(const void* data, size_t size) {
  if (size < kHeaderBytes)
    throw WireError("truncated message: " + std::to_string(size) + " bytes, shorter than the " +
                    std::to_string(kHeaderBytes) + "-byte header");
  if (std::memcmp(data, kMagic, sizeof(kMagic)) != 0)
    throw WireError("not a rendezvous message (it does not start with \"DTRZ\")");
  Reader r(data, size);
  r.skip(sizeof(kMagic));
  Header h;
  h.version = r.u16("version");
  h.type = r.u8("type");
  h.request_id = r.u64("request_id");
  return h;
}

Message decode(const void* data, size_t size) {
  if (size > kMaxMessageBytes)
    throw WireError("oversized message: " + std::to_string(size) + " bytes, the limit is " +
                    std::to_string(kMaxMessageBytes >> 20) + " MiB");
  Header h = decodeHeader(data, size);
  if (h.version != kProtocolVersion)
    throw WireError("protocol version " + std::to_string(h.version) + " is not version " +
                    std::to_string(kProtocolVersion));
  Reader r(data, size);
  r.skip(kHeaderBytes);
  Message m;
  m.request_id = h.request_id;
  m.body = readBody(static_cast<MessageType>(h.type), r);
  r.expectEnd();
  return m;
}

}  // namespace dtrain::wire
