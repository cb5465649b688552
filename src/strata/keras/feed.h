// Feeding a batch into a compiled program (feed.cc), shared by the training step and its
// evaluation twin (train_step.h). Internal to keras/.
#pragma once

#include <string>
#include <vector>

#include "strata/data/dataset.h"
#include "strata/keras/losses.h"
#include "strata/keras/model_internal.h"

namespace strata::keras {

// The class indices of rows [0, rows) of the batch's labels (component `label_index`) for a
// model with k outputs per example, as the loss reads them (sparse ids, or one-hot argmax).
Status ClassIndicesOf(const Loss& loss, const data::Element& batch, int64_t rows, int64_t k, size_t label_index,
                      const std::string& model, std::vector<int64_t>* labels);
// Copies rows [row0, row0 + rows) of the batch's inputs into program c, converting dtypes and
// zeroing the rows after them; with `labels` (the global batch's class indices), the program's
// label input too. `model` names the model in errors.
Status FeedInputs(CompiledProgram& c, const data::Element& batch, int64_t row0, int64_t rows,
                  const std::vector<int64_t>* labels, const std::string& model);

}  // namespace strata::keras
