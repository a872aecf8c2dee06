// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
// TensorFlow's record files (TensorBoard event files), which is not zlib's
// CRC-32 (core/io/crc32.h). A table-driven software version: the event files
// it guards are small. Pure functions; thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dtrain {

// CRC-32C of `n` bytes at `data` ("123456789" -> 0xE3069283).
uint32_t crc32c(const void* data, size_t n);

// The masked form TensorFlow records store: a CRC of data that itself holds
// CRCs is a poor check, so the stored value is rotated and offset.
uint32_t maskCrc32c(uint32_t crc);

// maskCrc32c(crc32c(data, n)).
uint32_t maskedCrc32c(const void* data, size_t n);

}  // namespace dtrain
