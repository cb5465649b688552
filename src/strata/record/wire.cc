#include "strata/record/wire.h"

namespace strata::record::wire {

bool SkipField(const char*& p, const char* end, uint32_t field, int wire_type, int depth) {
  switch (wire_type) {
    case kVarint: {
      uint64_t v;
      return ReadVarint(p, end, &v);
    }
    case kFixed64:
      if (end - p < 8) return false;
      p += 8;
      return true;
    case kFixed32:
      if (end - p < 4) return false;
      p += 4;
      return true;
    case kLengthDelimited: {
      std::string_view v;
      return ReadLengthDelimited(p, end, &v);
    }
    case kStartGroup: {
      if (depth <= 0) return false;
      for (;;) {
        uint32_t f;
        int wt;
        if (!ReadTag(p, end, &f, &wt)) return false;
        if (wt == kEndGroup) return f == field;
        if (!SkipField(p, end, f, wt, depth - 1)) return false;
      }
    }
    default:  // a stray end-group, or wire types 6 and 7
      return false;
  }
}

}  // namespace strata::record::wire
