// Typed errors thrown by the engine. Only cli/ turns them into exit codes and
// a one-line report; every message is written so a user can act on it.
#pragma once
#include <stdexcept>
#include <string>

namespace dtrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A job file, a --set override or a layer option is wrong.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A file could not be read or written (dataset, checkpoint, metrics).
class IoError : public Error {
 public:
  using Error::Error;
};

// A dataset file exists but its content is wrong (bad magic, sizes, labels).
class DataError : public Error {
 public:
  using Error::Error;
};

// A checkpoint is missing, truncated or fails its checksum.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

// Layer shapes do not fit together; the message names the layer.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// Collectives, rendezvous, peers.
class CommError : public Error {
 public:
  using Error::Error;
};

// A compute device: none visible, out of memory, a failed device call.
class DeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace dtrain
