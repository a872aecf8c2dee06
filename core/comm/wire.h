// The rendezvous wire format: one ZeroMQ frame per message, binary,
//
//   "DTRZ" | u16 protocol version | u8 message type | u64 request id | fields
//
// integers fixed-width little-endian, strings and byte strings a u32 length
// then the bytes. The header keeps this layout in every protocol version, so a
// coordinator can refuse a worker of another version by name and request id.
// A worker numbers its requests; the coordinator's reply carries the number
// (unsolicited messages, like an abort notice, carry 0).
//
// Decoding is bounds-checked and strict: a truncated, oversized or unknown
// message, or one with bytes left over, throws WireError saying why.
// Thread-safety: free functions over values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/comm/rendezvous_types.h"
#include "core/comm/store.h"
#include "core/errors.h"

namespace dtrain::wire {

constexpr char kMagic[4] = {'D', 'T', 'R', 'Z'};
constexpr uint16_t kProtocolVersion = 2;
constexpr size_t kHeaderBytes = 4 + 2 + 1 + 8;
// Also each socket's ZMQ_MAXMSGSIZE: a peer cannot make us buffer more.
constexpr size_t kMaxMessageBytes = size_t{64} << 20;

// A message that cannot be decoded; what() says why.
class WireError : public CommError {
 public:
  using CommError::CommError;
};

enum class MessageType : uint8_t {
  // worker -> coordinator
  kJoin = 1,
  kSet = 2,
  kGet = 3,
  kWait = 4,
  kAdd = 5,
  kCheck = 6,
  kBarrier = 7,
  kHeartbeat = 8,
  kAbort = 9,
  kLeave = 10,
  kReportLost = 11,
  // coordinator -> worker
  kWelcome = 64,
  kRefused = 65,
  kOk = 66,
  kValue = 67,
  kNumber = 68,
  kFlag = 69,
  kAbortNotice = 70,
  kRegroupNotice = 71,
};

// "join", "set", ...: for logs and errors.
const char* messageTypeName(MessageType type);

struct Header {
  uint16_t version = 0;
  uint8_t type = 0;  // raw: may name no MessageType
  uint64_t request_id = 0;
};

// Requests about a formed group carry its generation, so that a worker of an
// earlier group is refused instead of reading or writing this group's state.
struct GroupRequest {
  uint64_t generation = 0;
};

struct Join {
  static constexpr MessageType kType = MessageType::kJoin;
  JoinRequest request;
};
struct Set : GroupRequest {
  static constexpr MessageType kType = MessageType::kSet;
  std::string key;
  Bytes value;
};
// Waits (on the coordinator) up to timeout_ms for the key; answered by Value.
struct Get : GroupRequest {
  static constexpr MessageType kType = MessageType::kGet;
  std::string key;
  uint32_t timeout_ms = 0;
};
// Waits up to timeout_ms until every key is set; answered by Ok.
struct Wait : GroupRequest {
  static constexpr MessageType kType = MessageType::kWait;
  std::vector<std::string> keys;
  uint32_t timeout_ms = 0;
};
// Answered by Number (the new value).
struct Add : GroupRequest {
  static constexpr MessageType kType = MessageType::kAdd;
  std::string key;
  int64_t delta = 0;
};
// Answered by Flag (set or not), without waiting.
struct Check : GroupRequest {
  static constexpr MessageType kType = MessageType::kCheck;
  std::string key;
};
// Answered by Ok once every rank has arrived, or Refused at the deadline.
struct Barrier : GroupRequest {
  static constexpr MessageType kType = MessageType::kBarrier;
  std::string name;
  uint32_t timeout_ms = 0;
};
// Generation 0 while the worker is still waiting for its group to form.
struct Heartbeat : GroupRequest {
  static constexpr MessageType kType = MessageType::kHeartbeat;
};
struct Abort : GroupRequest {
  static constexpr MessageType kType = MessageType::kAbort;
  std::string reason;
};
struct Leave : GroupRequest {
  static constexpr MessageType kType = MessageType::kLeave;
};

// A host's dtrain (not a member of any group) saw one of its workers die: in
// an elastic run the coordinator loses it at once instead of waiting for its
// silence. Carries the job's id and token, as a join does; answered by Ok.
struct ReportLost {
  static constexpr MessageType kType = MessageType::kReportLost;
  std::string job_id;
  std::string token;
  int32_t node = 0;
  int32_t pid = 0;
  std::string why;
};

struct Welcome {
  static constexpr MessageType kType = MessageType::kWelcome;
  Membership membership;
};
// The request was not carried out; the reason is a full sentence for the user.
struct Refused {
  static constexpr MessageType kType = MessageType::kRefused;
  std::string reason;
};
struct Ok {
  static constexpr MessageType kType = MessageType::kOk;
};
struct Value {
  static constexpr MessageType kType = MessageType::kValue;
  Bytes value;
};
struct Number {
  static constexpr MessageType kType = MessageType::kNumber;
  int64_t value = 0;
};
struct Flag {
  static constexpr MessageType kType = MessageType::kFlag;
  bool value = false;
};
// The group is aborted; sent unasked to every rank still in it.
struct AbortNotice {
  static constexpr MessageType kType = MessageType::kAbortNotice;
  int32_t origin_rank = -1;  // -1: the coordinator itself (a lost rank, a deadline)
  std::string origin_host;
  std::string reason;  // a full sentence naming the origin
};

// An elastic run's group is over and the next forms from its survivors: sent
// unasked to every rank of it. A rank answers at once with a heartbeat (it is
// alive), leaves the step under way and joins again.
struct RegroupNotice {
  static constexpr MessageType kType = MessageType::kRegroupNotice;
  uint64_t generation = 0;  // of the group that is over
  std::string reason;       // a full sentence: who was lost, or who asked
};

using Body = std::variant<Join, Set, Get, Wait, Add, Check, Barrier, Heartbeat, Abort, Leave, ReportLost,
                          Welcome, Refused, Ok, Value, Number, Flag, AbortNotice, RegroupNotice>;

struct Message {
  uint64_t request_id = 0;
  Body body;
};

MessageType typeOf(const Body& body);

// The frame for `body`. Does not check the size limit: senders check what
// they let users put in (values, keys) against kMaxMessageBytes.
std::string encode(uint64_t request_id, const Body& body);

// The header alone, whatever the version. Throws WireError when the bytes are
// too short for a header or do not start with the magic.
Header decodeHeader(const void* data, size_t size);
// A whole message of this protocol version. Throws WireError.
Message decode(const void* data, size_t size);

}  // namespace dtrain::wire
