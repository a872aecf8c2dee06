// UTF-8 validation shared by the JSON writer and parser. Pure; thread-safe.
#pragma once
#include <cstddef>

namespace dtrain {

// Length (1-4) of the well-formed UTF-8 sequence starting at `p`, given `avail`
// readable bytes; 0 when it is malformed (overlong, surrogate, beyond U+10FFFF,
// truncated or a stray continuation byte). `avail` must be at least 1.
size_t utf8SequenceLength(const unsigned char* p, size_t avail);

// Appends code point `cp` (at most U+10FFFF, not a surrogate) encoded as UTF-8.
template <typename String>
void appendUtf8(String& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace dtrain
