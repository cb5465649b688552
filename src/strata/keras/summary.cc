// Model.summary(): the layer table as Keras prints it (names, output shapes, parameters).
#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "strata/keras/model.h"
#include "strata/keras/model_internal.h"

namespace strata::keras {
namespace {

std::string WithCommas(int64_t v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

// Lays out one summary row at the column positions, wrapping long fields onto more lines
// as Keras does.
void SummaryRow(std::string* out, const std::vector<std::string>& fields, const std::vector<int>& positions) {
  std::vector<std::string> rest = fields;
  bool first = true;
  while (first || std::any_of(rest.begin(), rest.end(), [](const std::string& s) { return !s.empty(); })) {
    first = false;
    std::string line;
    int start = 0;
    for (size_t i = 0; i < rest.size(); ++i) {
      const int width = positions[i] - start - (i == 0 ? 1 : 0);
      std::string cell = rest[i].substr(0, static_cast<size_t>(std::max(0, width - 1)));
      rest[i] = rest[i].substr(cell.size());
      if (i == 0) line += " ";
      line += cell;
      line.resize(static_cast<size_t>(positions[i]), ' ');
      start = positions[i];
    }
    *out += line + "\n";
  }
}

}  // namespace

int64_t Model::count_params() const {
  int64_t total = 0;
  for (const auto& e : layers_) total += e->params;
  return total;
}

std::string Model::Summary(int line_length) const {
  const bool sequential_like = inputs_.size() == 1 && outputs_.size() == 1 &&
                               std::all_of(layers_.begin(), layers_.end(), [](const auto& e) {
                                 return e->nodes.size() == 1 && (!e->layer || e->nodes[0]->inbound.size() == 1);
                               });
  std::vector<int> positions;
  std::vector<std::string> header;
  if (sequential_like) {
    positions = {static_cast<int>(line_length * 0.45), static_cast<int>(line_length * 0.85), line_length};
    header = {"Layer (type)", "Output Shape", "Param #"};
  } else {
    line_length = std::max(line_length, 98);
    positions = {static_cast<int>(line_length * 0.33), static_cast<int>(line_length * 0.55),
                 static_cast<int>(line_length * 0.67), line_length};
    header = {"Layer (type)", "Output Shape", "Param #", "Connected to"};
  }
  std::string out = "Model: \"" + name_ + "\"\n" + std::string(line_length, '_') + "\n";
  SummaryRow(&out, header, positions);
  out += std::string(line_length, '=') + "\n";
  // Keras's row order: the inputs, then model.layers (layers(): by depth from the outputs),
  // so a branching model's summary lists its rows as Keras's does.
  std::vector<const LayerEntry*> rows;
  std::map<const Layer*, const LayerEntry*> entry_of;
  for (const auto& e : layers_) {
    if (e->layer) entry_of[e->layer.get()] = e.get();
    else rows.push_back(e.get());
  }
  for (const LayerPtr& l : layers()) rows.push_back(entry_of.at(l.get()));
  int64_t total = 0, trainable = 0;
  bool first = true;
  for (const LayerEntry* e : rows) {
    // Keras hides the InputLayer of a Sequential; a functional chain (VGG16) lists it.
    if (sequential_like && sequential_ && !e->layer) continue;
    if (!first) out += std::string(line_length, ' ') + "\n";
    first = false;
    std::string name = e->layer ? e->layer->name() + " (" + e->layer->class_name() + ")"
                                : e->input_node->input_name + " (InputLayer)";
    for (size_t i = 0; i < std::max<size_t>(1, e->output_shapes.size()); ++i) {
      std::vector<std::string> row = {i == 0 ? name : "", i < e->output_shapes.size() ? e->output_shapes[i] : "",
                                      i == 0 ? std::to_string(e->params) : ""};
      if (!sequential_like) {
        std::string conn = e->layer && i < e->connected_to.size() ? e->connected_to[i] : "[]";
        if (e->layer) conn = "['" + conn + "']";
        row.push_back(conn);
      }
      SummaryRow(&out, row, positions);
    }
    total += e->params;
    trainable += e->layer && !e->layer->trainable ? 0 : e->trainable;  // frozen: none, as Keras counts
  }
  out += std::string(line_length, '=') + "\n";
  out += "Total params: " + WithCommas(total) + "\n";
  out += "Trainable params: " + WithCommas(trainable) + "\n";
  out += "Non-trainable params: " + WithCommas(total - trainable) + "\n";
  out += std::string(line_length, '_') + "\n";
  return out;
}

void Model::summary() const { std::fputs(Summary().c_str(), stdout); }

}  // namespace strata::keras
