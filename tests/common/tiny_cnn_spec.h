// The spec of the tiny CNN whose checkpoints testdata/checkpoints/ keeps (tiny_cnn-*.ckpt, written
// by earlier versions: PROVENANCE.md there), read from its one home beside them,
// testdata/checkpoints/tiny_cnn.json, the spec `strata train --model` trained them from. Empty
// when the file cannot be read: the tests that build it then fail naming the model.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace strata::test {

inline std::string TinyCnnSpec() {
  std::ifstream in(std::string(STRATA_TESTDATA) + "/checkpoints/tiny_cnn.json");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace strata::test
