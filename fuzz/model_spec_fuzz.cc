// Fuzzes model spec loading (keras/spec.h ModelFromJson), what `strata train --model FILE`
// reads: Keras's model.to_json() structure, Sequential or Functional. Any bytes must give a
// model or an InvalidArgument/Unimplemented error, never a crash, an exception, a hang or
// undefined behaviour. A model that parses must also summarize (its shapes were inferred), and
// the same text must build the same model again (same summary, same parameter count): a spec's
// meaning cannot depend on state left by an earlier parse.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "strata/keras/model.h"
#include "strata/keras/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto m = strata::keras::ModelFromJson(text);
  if (!m.ok()) {
    const auto code = m.status().code();
    if (code != strata::StatusCode::kInvalidArgument && code != strata::StatusCode::kUnimplemented) std::abort();
    return 0;
  }
  const std::string summary = (*m)->Summary();
  const int64_t params = (*m)->count_params();
  auto again = strata::keras::ModelFromJson(text);
  if (!again.ok() || (*again)->Summary() != summary || (*again)->count_params() != params) std::abort();
  return 0;
}
