// `strata records write`'s input: one JSON object per line becomes one tf.train.Example.
// Kept apart from the command so that the fuzz target (fuzz/records_write_jsonl_fuzz.cc)
// runs the very code the command runs.
//   integers (and booleans) -> int64_list, other numbers -> float_list,
//   strings -> bytes_list, {"b64": "..."} -> binary bytes, a list of one kind -> a list feature,
//   null or [] -> an empty Feature (no list), as TFX writes missing values.
#pragma once

#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/record/example.h"

namespace strata::cli {

std::string Base64Encode(std::string_view in);
// Standard alphabet, '=' padding only at the end; false on any other character.
bool Base64Decode(std::string_view in, std::string* out);

// One line of the file. InvalidArgument for text that is not JSON, a value that is not an
// object, or a feature that cannot be typed (naming the key and why); the caller adds the
// file name and line number.
Result<record::Example> ExampleFromJsonLine(std::string_view line);

}  // namespace strata::cli
