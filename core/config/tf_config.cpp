#include "core/config/tf_config.h"

#include <cctype>
#include <map>
#include <set>

#include "core/errors.h"
#include "core/io/json.h"

namespace dtrain {
namespace {

const char* const kTypeChoices = "chief, worker, ps or evaluator";

[[noreturn]] void fail(const std::string& what) { throw ConfigError("TF_CONFIG: " + what); }

// The task type a TF_CONFIG name stands for; `legacy` says it was "master".
std::optional<TfTaskType> taskTypeNamed(const std::string& name, bool* legacy = nullptr) {
  if (legacy) *legacy = name == "master";
  if (name == "master") return TfTaskType::Chief;
  for (TfTaskType type : kTfTaskTypes)
    if (name == tfTaskTypeName(type)) return type;
  return std::nullopt;
}

// A key as part of a field name: bare when it is a plain word, else quoted, so
// a key holding a newline cannot split the one-line message.
std::string keyText(const std::string& key) {
  bool plain = !key.empty();
  for (char c : key) plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
  return plain ? key : jsonQuote(key);
}

// "2 addresses (0 to 1)", "1 address (index 0)", "no addresses".
std::string countText(size_t n) {
  if (n == 0) return "no addresses";
  if (n == 1) return "1 address (index 0)";
  return std::to_string(n) + " addresses (0 to " + std::to_string(n - 1) + ")";
}

JsonValue parseText(const std::string& text) {
  bool blank = true;
  for (char c : text) blank = blank && std::isspace(static_cast<unsigned char>(c));
  if (blank)
    throw ConfigError(
        "TF_CONFIG is empty; set it to {\"cluster\": {...}, \"task\": {...}} or leave it unset");
  try {
    return parseJson(text);
  } catch (const JsonParseError& e) {
    throw ConfigError("TF_CONFIG is not JSON: byte " + std::to_string(e.offset()) + ": " + e.reason());
  }
}

HostPort parseAddress(const JsonValue& v, const std::string& field) {
  if (!v.isString()) fail(field + " must be a \"host:port\" string (got " + std::string(v.typeName()) + ")");
  const std::string& text = v.asString();
  if (text.find(':') == std::string::npos)
    fail(field + " " + jsonQuote(text) + " has no port; write \"host:port\", like \"10.0.0.1:2222\"");
  std::string problem;
  std::optional<HostPort> address = parseHostPort(text, &problem);
  if (!address) fail(field + " " + jsonQuote(text) + ": " + problem);
  return *address;
}

// A task index written as an object key ("0", "1"): digits only; -1 if not.
int64_t indexKey(const std::string& key) {
  if (key.empty() || key.size() > 9) return -1;
  for (char c : key)
    if (c < '0' || c > '9') return -1;
  return std::stoll(key);
}

// One task type's list: an array of addresses, or tf.train.ClusterSpec's
// object from task index to address, which must then name every index 0..N-1.
std::vector<HostPort> parseTaskList(const JsonValue& v, const std::string& key) {
  const std::string field = "cluster." + key;
  std::vector<HostPort> tasks;
  if (v.isArray()) {
    const JsonValue::Array& items = v.asArray();
    for (size_t i = 0; i < items.size(); ++i)
      tasks.push_back(parseAddress(items[i], field + "[" + std::to_string(i) + "]"));
    return tasks;
  }
  if (!v.isObject())
    fail(field + " must be a list of \"host:port\" addresses (got " + std::string(v.typeName()) + ")");
  std::map<int64_t, const JsonValue*> by_index;
  for (const JsonValue::Member& m : v.asObject()) {
    int64_t index = indexKey(m.first);
    if (index < 0) fail(field + " key " + jsonQuote(m.first) + " is not a task index (\"0\", \"1\", ...)");
    by_index[index] = &m.second;
  }
  for (size_t i = 0; i < v.asObject().size(); ++i) {
    auto it = by_index.find(static_cast<int64_t>(i));
    if (it == by_index.end())
      fail(field + " has no task " + std::to_string(i) +
           "; dtrain needs every task's address, indices 0 to " + std::to_string(v.asObject().size() - 1));
    tasks.push_back(parseAddress(*it->second, field + "[" + std::to_string(i) + "]"));
  }
  return tasks;
}

// `type`'s list in `tf`, const or not.
template <typename Config>
auto& listOf(Config& tf, TfTaskType type) {
  switch (type) {
    case TfTaskType::Chief:
      return tf.chief;
    case TfTaskType::Ps:
      return tf.ps;
    case TfTaskType::Evaluator:
      return tf.evaluator;
    case TfTaskType::Worker:
      break;
  }
  return tf.worker;
}

// Fills the lists; returns the task types the cluster names.
std::set<TfTaskType> parseCluster(const JsonValue& root, TfConfig& tf) {
  const JsonValue* cluster = root.find("cluster");
  if (!cluster)
    fail(
        "no \"cluster\"; give every task's address, like {\"cluster\": {\"worker\": [\"10.0.0.1:2222\", "
        "\"10.0.0.2:2222\"]}, ...}");
  if (!cluster->isObject())
    fail("cluster must be an object of task lists, like {\"worker\": [\"10.0.0.1:2222\"]} (got " +
         std::string(cluster->typeName()) + ")");
  std::set<TfTaskType> present;
  for (const JsonValue::Member& m : cluster->asObject()) {
    bool legacy = false;
    std::optional<TfTaskType> type = taskTypeNamed(m.first, &legacy);
    if (!type) fail("cluster." + keyText(m.first) + " is not a task type; use " + kTypeChoices);
    if (!present.insert(*type).second)  // only "chief" and "master" can meet here
      fail("cluster has both \"chief\" and \"master\" (the chief's old name); keep \"chief\"");
    if (legacy) tf.chief_key = "master";
    listOf(tf, *type) = parseTaskList(m.second, m.first);
  }
  for (TfTaskType type : {TfTaskType::Chief, TfTaskType::Evaluator})
    if (tf.tasks(type).size() > 1)
      fail("cluster." + tf.keyOf(type) + " lists " + std::to_string(tf.tasks(type).size()) +
           " addresses; a cluster has at most one " + tfTaskTypeName(type));
  if (tf.chief.empty() && tf.worker.empty())
    fail("cluster has no chief or worker; list the tasks that train, like \"worker\": [\"10.0.0.1:2222\"]");
  return present;
}

// Two tasks cannot listen on one address.
void checkDistinctAddresses(const TfConfig& tf) {
  std::map<std::string, std::string> seen;  // "host:port" (host lower-cased) -> its field
  for (TfTaskType type : kTfTaskTypes) {
    const std::vector<HostPort>& tasks = tf.tasks(type);
    for (size_t i = 0; i < tasks.size(); ++i) {
      std::string host = tasks[i].host;
      for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const std::string field = "cluster." + tf.keyOf(type) + "[" + std::to_string(i) + "]";
      auto [it, inserted] = seen.emplace(joinHostPort(host, tasks[i].port), field);
      if (!inserted)
        fail(field + " " + jsonQuote(joinHostPort(tasks[i].host, tasks[i].port)) + " is also " + it->second +
             "; every task needs an address of its own");
    }
  }
}

// TensorFlow applies int() to task.index, so "1" counts as 1; 1.5 does not.
int64_t parseIndex(const JsonValue& v) {
  if (v.isNumber()) {
    try {
      return v.asInt64();
    } catch (const Error&) {
      fail("task.index must be an integer (got " + jsonNumber(v.asDouble()) + ")");
    }
  }
  if (v.isString()) {
    const std::string& s = v.asString();
    size_t digits = s.size() - (!s.empty() && s[0] == '-' ? 1 : 0);
    bool ok = digits > 0 && digits <= 18;
    for (size_t i = s.size() - digits; ok && i < s.size(); ++i) ok = s[i] >= '0' && s[i] <= '9';
    if (ok) return std::stoll(s);
    fail("task.index must be an integer (got " + jsonQuote(s) + ")");
  }
  fail("task.index must be an integer (got " + std::string(v.typeName()) + ")");
}

void parseTask(const JsonValue& root, const std::set<TfTaskType>& present, TfConfig& tf) {
  const JsonValue* task = root.find("task");
  if (!task)
    fail(
        "no \"task\"; say which task this process is, like {\"task\": {\"type\": \"worker\", \"index\": 0}}");
  if (!task->isObject())
    fail("task must be an object like {\"type\": \"worker\", \"index\": 0} (got " +
         std::string(task->typeName()) + ")");
  const JsonValue* type = task->find("type");
  if (!type) fail(std::string("task has no \"type\"; use ") + kTypeChoices);
  if (!type->isString())
    fail(std::string("task.type must be a string, one of ") + kTypeChoices + " (got " + type->typeName() +
         ")");
  bool legacy = false;
  std::optional<TfTaskType> task_type = taskTypeNamed(type->asString(), &legacy);
  if (!task_type)
    fail("task.type " + jsonQuote(type->asString()) + " is not one of chief, worker, ps, evaluator");
  // "master" and "chief" are one type, but the task must use the cluster's spelling.
  if (!present.count(*task_type) ||
      (*task_type == TfTaskType::Chief && (tf.chief_key == "master") != legacy)) {
    std::string has;
    for (TfTaskType t : kTfTaskTypes)
      if (present.count(t)) has += (has.empty() ? "" : ", ") + tf.keyOf(t);
    fail("task.type " + jsonQuote(type->asString()) + " names no list in cluster (it has " + has + ")");
  }
  tf.task_type = *task_type;
  const std::string list = "cluster." + tf.keyOf(tf.task_type);
  const size_t n = tf.tasks(tf.task_type).size();
  const JsonValue* index = task->find("index");
  if (!index)
    fail("task has no \"index\"; give this process's place in " + list + ", which lists " + countText(n));
  const int64_t i = parseIndex(*index);
  if (i < 0 || i >= static_cast<int64_t>(n))
    fail("task.index " + std::to_string(i) + " is out of range: " + list + " lists " + countText(n));
  tf.task_index = static_cast<int>(i);
}

}  // namespace

const char* tfTaskTypeName(TfTaskType type) {
  switch (type) {
    case TfTaskType::Chief:
      return "chief";
    case TfTaskType::Worker:
      return "worker";
    case TfTaskType::Ps:
      return "ps";
    case TfTaskType::Evaluator:
      return "evaluator";
  }
  return "?";
}

const std::vector<HostPort>& TfConfig::tasks(TfTaskType type) const { return listOf(*this, type); }

std::string TfConfig::keyOf(TfTaskType type) const {
  return type == TfTaskType::Chief ? chief_key : tfTaskTypeName(type);
}

TfConfig parseTfConfig(const std::string& text) {
  const JsonValue root = parseText(text);
  if (!root.isObject())
    throw ConfigError("TF_CONFIG must be a JSON object like {\"cluster\": {...}, \"task\": {...}} (got " +
                      std::string(root.typeName()) + ")");
  TfConfig tf;
  const std::set<TfTaskType> present = parseCluster(root, tf);
  checkDistinctAddresses(tf);
  parseTask(root, present, tf);
  return tf;
}

std::optional<std::string> tfConfigText(const std::function<const char*(const char*)>& getenv_fn) {
  const char* text = getenv_fn("TF_CONFIG");
  if (!text || !*text) return std::nullopt;
  return std::string(text);
}

}  // namespace dtrain
