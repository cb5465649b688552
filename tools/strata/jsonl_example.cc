#include "jsonl_example.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

namespace strata::cli {

using record::Feature;

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; --k) out += kB64[(v >> (6 * k)) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool Base64Decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (char c : in) {
    if (c == '=') {
      ++pad;
      continue;
    }
    if (pad) return false;  // data after padding
    const char* p = std::strchr(kB64, c);
    if (c == 0 || !p) return false;
    acc = (acc << 6) | static_cast<uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return pad <= 2;
}

namespace {

Status JsonToFeature(const std::string& key, const nlohmann::json& v, Feature* f) {
  auto bad = [&](const std::string& why) { return InvalidArgument("key '" + key + "': " + why); };
  auto is_b64 = [](const nlohmann::json& x) { return x.is_object() && x.size() == 1 && x.contains("b64") && x["b64"].is_string(); };
  nlohmann::json items = v.is_array() ? v : nlohmann::json::array({v});
  if (v.is_null() || items.empty()) {
    *f = Feature{};  // an empty Feature (no list), as TFX writes missing values
    return Status::OK();
  }
  bool all_int = true, all_num = true, all_bytes = true;
  for (const auto& x : items) {
    all_int &= x.is_number_integer() || x.is_boolean();
    all_num &= x.is_number() || x.is_boolean();
    all_bytes &= x.is_string() || is_b64(x);
  }
  if (all_int) {
    *f = Feature::Int64s({});
    for (const auto& x : items) {
      if (x.is_boolean()) f->int64s.push_back(x.get<bool>());
      else if (x.is_number_unsigned() && x.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return bad("integer beyond int64");
      else f->int64s.push_back(x.get<int64_t>());
    }
  } else if (all_num) {
    *f = Feature::Floats({});
    for (const auto& x : items) {
      const double d = x.is_boolean() ? double(x.get<bool>()) : x.get<double>();
      // A double beyond float's range has no float value (converting it is undefined
      // behaviour, which the fuzz target's UBSan reports): refused, not turned into inf.
      if (std::fabs(d) > std::numeric_limits<float>::max()) return bad("number " + x.dump() + " is beyond float32's range");
      f->floats.push_back(static_cast<float>(d));
    }
  } else if (all_bytes) {
    *f = Feature::Bytes({});
    for (const auto& x : items) {
      if (x.is_string()) {
        f->bytes.push_back(x.get<std::string>());
      } else {
        std::string raw;
        if (!Base64Decode(x["b64"].get<std::string>(), &raw)) return bad("invalid base64");
        f->bytes.push_back(std::move(raw));
      }
    }
  } else {
    return bad("values must be all integers, all numbers, or all strings/{\"b64\": ...}");
  }
  return Status::OK();
}

}  // namespace

Result<record::Example> ExampleFromJsonLine(std::string_view line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(e.what());
  }
  if (!j.is_object()) return InvalidArgument("not a JSON object");
  record::Example ex;
  for (const auto& [k, v] : j.items()) STRATA_RETURN_IF_ERROR(JsonToFeature(k, v, &ex.features[k]));
  return ex;
}

}  // namespace strata::cli
