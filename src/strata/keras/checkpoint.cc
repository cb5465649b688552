#include "strata/keras/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>
#include <nlohmann/json.hpp>

#include "strata/core/file.h"
#include "strata/record/record_reader.h"
#include "strata/record/record_writer.h"

namespace strata::keras {

namespace {
constexpr std::string_view kWorkerStates = "strata-workers ";

std::string_view Bytes(const Tensor& t) { return {static_cast<const char*>(t.raw_data()), t.nbytes()}; }

// The atomic writer with a call between the last byte and the publishing fsync + rename.
class HookedFile final : public WritableFile {
 public:
  HookedFile(std::unique_ptr<WritableFile> file, const std::function<void()>& hook) : file_(std::move(file)), hook_(hook) {}
  const std::string& name() const override { return file_->name(); }
  Status Append(std::string_view data) override { return file_->Append(data); }
  Status Flush() override { return file_->Flush(); }
  Status Close() override {
    STRATA_RETURN_IF_ERROR(file_->Flush());
    hook_();
    return file_->Close();
  }

 private:
  std::unique_ptr<WritableFile> file_;
  const std::function<void()>& hook_;
};
}  // namespace

std::string OptimizerJson(const Optimizer& o) {
  nlohmann::json j = {{"name", o.name()},          {"slot_blocks", o.slot_blocks()}, {"weight_decay", o.weight_decay},
                      {"clipnorm", o.clipnorm},   {"global_clipnorm", o.global_clipnorm}};
  switch (o.kind) {
    case Optimizer::Kind::kSGD:
      j["momentum"] = o.momentum;
      j["nesterov"] = o.nesterov;
      break;
    case Optimizer::Kind::kAdam:
    case Optimizer::Kind::kAdamW:
      j["beta_1"] = o.beta_1;
      j["beta_2"] = o.beta_2;
      j["epsilon"] = o.epsilon;
      break;
    case Optimizer::Kind::kRMSprop:
      j["rho"] = o.rho;
      j["momentum"] = o.momentum;
      j["epsilon"] = o.epsilon;
      break;
  }
  if (o.use_ema) {  // only then: headers of optimizers without it stay as they were
    j["use_ema"] = true;
    j["ema_momentum"] = o.ema_momentum;
    j["ema_overwrite_frequency"] = o.ema_overwrite_frequency;
  }
  return j.dump();
}

Status WriteCheckpoint(const std::string& path, const backend::VariableStore& store_in, const Optimizer& optimizer,
                       const Tensor& slots, const CheckpointState& state, const std::function<void()>& before_publish) {
  auto& store = const_cast<backend::VariableStore&>(store_in);  // views only; nothing is changed
  nlohmann::json vars = nlohmann::json::array();
  for (const auto& e : store.entries()) {
    vars.push_back({{"name", e.name}, {"shape", e.shape.dims()}, {"role", static_cast<int>(e.role)},
                    {"trainable", e.trainable}, {"offset", e.offset}, {"size", e.size}});
  }
  nlohmann::json header = {{"format", "strata-checkpoint"}, {"version", 1},
                           {"global_step", state.global_step}, {"epoch", state.epoch},
                           {"step_in_epoch", state.step_in_epoch},
                           {"params", store.params().num_elements()}, {"slots", slots.num_elements()},
                           {"variables", vars},
                           {"optimizer", nlohmann::json::parse(OptimizerJson(optimizer))},
                           {"extra", nlohmann::json::parse(state.extra_json, nullptr, false)}};
  if (!state.model_json.empty()) {
    auto model = nlohmann::json::parse(state.model_json, nullptr, false);
    if (!model.is_object())
      return InvalidArgument("checkpoint " + path + ": the model's description is not a JSON object");
    header["model"] = std::move(model);
  }
  std::unique_ptr<record::RecordWriter> w;
  if (before_publish) {
    STRATA_ASSIGN_OR_RETURN(auto file, NewAtomicWritableFile(path));
    STRATA_ASSIGN_OR_RETURN(w, record::RecordWriter::Open(std::make_unique<HookedFile>(std::move(file), before_publish)));
  } else {
    STRATA_ASSIGN_OR_RETURN(w, record::RecordWriter::Open(path));
  }
  STRATA_RETURN_IF_ERROR(w->WriteRecord(header.dump()));
  STRATA_RETURN_IF_ERROR(w->WriteRecord(Bytes(store.params())));
  STRATA_RETURN_IF_ERROR(w->WriteRecord(Bytes(slots)));
  STRATA_RETURN_IF_ERROR(w->WriteRecord(state.iterator_state));
  return w->Close();
}

namespace {
// One variable's values: where they lie in the file's parameter record and in the store.
struct Copy {
  int64_t from = 0, to = 0, size = 0;
  bool trainable_in_file = false, trainable_in_model = false;
  std::string name;
};

// Checks the whole header against the model before anything is copied, so a bad file
// leaves the model as it was. nlohmann::json's typed accessors throw on a wrong type
// (a name that is a number, say): that is a damaged file, reported as such.
Result<std::vector<Copy>> PlanLoad(const std::string& path, const nlohmann::json& header, size_t param_bytes,
                                   const backend::VariableStore& store) try {
  const auto& vars = header.at("variables");
  if (!vars.is_array()) return Corruption("checkpoint " + path + ": no variable table");
  std::vector<bool> seen(store.entries().size(), false);
  std::vector<Copy> plan;
  for (const auto& v : vars) {
    const std::string name = v.value("name", "");
    const backend::VariableStore::Entry* e = store.Find(name);
    if (!e) return NotFound("checkpoint " + path + ": variable " + name + " is not in this model");
    std::vector<int64_t> dims = v.value("shape", std::vector<int64_t>{});
    if (Shape(dims) != e->shape)
      return InvalidArgument("checkpoint " + path + ": variable " + name + " has shape " + Shape(dims).ToString() +
                             ", the model expects " + e->shape.ToString());
    const int64_t off = v.value("offset", int64_t{-1}), size = v.value("size", int64_t{-1});
    if (off < 0 || size != e->size || static_cast<uint64_t>(off) + static_cast<uint64_t>(size) > param_bytes / 4)
      return Corruption("checkpoint " + path + ": variable " + name + " lies outside its block");
    // Files without the flag (none written so) count as the model's layout.
    const bool trainable = v.value("trainable", e->trainable);
    plan.push_back({off, e->offset, size, trainable, e->trainable, name});
    seen[static_cast<size_t>(e - store.entries().data())] = true;
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) return NotFound("checkpoint " + path + ": has no value for variable " + store.entries()[i].name);
  return plan;
} catch (const nlohmann::json::exception& e) {
  return Corruption("checkpoint " + path + ": bad header record (" + e.what() + ")");
}

// Record 0 as JSON, checked to be a version-1 Strata checkpoint header.
Result<nlohmann::json> ParseHeader(const std::string& path, const std::string& bytes) {
  auto header = nlohmann::json::parse(bytes, nullptr, false);
  if (!header.is_object() || !header.contains("format") || header["format"] != "strata-checkpoint")
    return Corruption("checkpoint " + path + ": not a Strata checkpoint (bad header record)");
  if (!header.contains("version") || header["version"] != 1)
    return Unimplemented("checkpoint " + path + ": version " + header.value("version", nlohmann::json()).dump() +
                         " is not supported");
  return header;
}

// Everything the header says besides the variable table; the iterator state is record 3's.
Result<CheckpointState> StateFromHeader(const std::string& path, const nlohmann::json& header) {
  CheckpointState state;
  try {
    state.global_step = header.value("global_step", int64_t{0});
    state.epoch = header.value("epoch", int64_t{0});
    state.step_in_epoch = header.value("step_in_epoch", int64_t{0});
  } catch (const nlohmann::json::exception& e) {
    return Corruption("checkpoint " + path + ": bad step or epoch in the header (" + e.what() + ")");
  }
  const bool has_extra = header.contains("extra");
  state.extra_json = has_extra ? header["extra"].dump() : "{}";
  // Before the model had its own field, `strata train` rewrote the file to add it to "extra".
  if (header.contains("model")) state.model_json = header["model"].dump();
  else if (has_extra && header["extra"].is_object() && header["extra"].contains("model"))
    state.model_json = header["extra"]["model"].dump();
  if (header.contains("optimizer")) state.optimizer_json = header["optimizer"].dump();
  return state;
}

// The slot blocks the header's "optimizer" says the file holds; -1 in a file written before
// the optimizer was recorded. No optimizer keeps more than a few blocks: a larger count is
// damage (and would overflow the size it is multiplied into).
Result<int64_t> RecordedSlotBlocks(const std::string& path, const nlohmann::json& header, std::string* name) {
  if (!header.contains("optimizer")) return int64_t{-1};
  const auto& o = header["optimizer"];
  if (!o.is_object() || !o.contains("slot_blocks") || !o["slot_blocks"].is_number_integer() ||
      o["slot_blocks"].get<int64_t>() < 0 || o["slot_blocks"].get<int64_t>() > 8 || !o.contains("name") ||
      !o["name"].is_string())
    return Corruption("checkpoint " + path +
                      ": bad \"optimizer\" in the header (no name, or no slot_blocks from 0 to 8)");
  *name = o["name"].get<std::string>();
  return o["slot_blocks"].get<int64_t>();
}

}  // namespace

Status ReadCheckpoint(const std::string& path, backend::VariableStore* store, Tensor* slot_block, CheckpointState* state,
                      ReadCheckpointOptions options) {
  STRATA_ASSIGN_OR_RETURN(auto r, record::RecordReader::Open(path));
  // A checkpoint is four records; one that ends sooner (at a record boundary, where every
  // record left has a valid checksum, or inside one) was cut short.
  int records = 0;
  auto read = [&](std::string* out, const char* what) -> Status {
    Status s = r->ReadRecord(out);
    if (s.IsOutOfRange())
      return Corruption("checkpoint " + path + ": cut short, it ends after " + std::to_string(records) +
                        " of its 4 records, before the " + what + " (" + s.message() + ")");
    if (s.ok()) ++records;
    return s.WithContext("checkpoint " + path + " " + what);
  };
  std::string header_bytes, params, slots, iter;
  STRATA_RETURN_IF_ERROR(read(&header_bytes, "header"));
  STRATA_ASSIGN_OR_RETURN(const nlohmann::json header, ParseHeader(path, header_bytes));
  STRATA_RETURN_IF_ERROR(read(&params, "parameters"));
  STRATA_RETURN_IF_ERROR(read(&slots, "optimizer slots"));
  STRATA_RETURN_IF_ERROR(read(&iter, "iterator state"));

  // Variables are matched by name, so a checkpoint survives a change of variable order.
  STRATA_ASSIGN_OR_RETURN(std::vector<Copy> plan, PlanLoad(path, header, params.size(), *store));
  STRATA_ASSIGN_OR_RETURN(CheckpointState loaded, StateFromHeader(path, header));
  loaded.iterator_state = std::move(iter);
  // Frozen layers: the slots are blocks parallel to the trainable variables only, so a
  // different set of trainable variables is a different slot layout.
  const Copy* differs = nullptr;
  int64_t file_trainable = 0;
  for (const Copy& c : plan) {
    if (c.trainable_in_file != c.trainable_in_model && differs == nullptr) differs = &c;
    if (c.trainable_in_file) file_trainable += c.size;
  }
  const int64_t model_trainable = store->num_trainable();
  int64_t model_blocks = -1, file_blocks = -1;
  if (!options.weights_only) {
    if (differs != nullptr && !options.remap_slots)
      return InvalidArgument("checkpoint " + path + ": variable " + differs->name + " is " +
                             (differs->trainable_in_file ? "trainable" : "frozen (not trainable)") +
                             " in the checkpoint but " + (differs->trainable_in_model ? "trainable" : "frozen") +
                             " in the model: freeze the same layers before compile() to resume from it "
                             "(load_weights takes the weights of a checkpoint with other layers frozen)");
    const int64_t file_slots = static_cast<int64_t>(slots.size() / 4);
    std::string file_optimizer;
    STRATA_ASSIGN_OR_RETURN(const int64_t recorded, RecordedSlotBlocks(path, header, &file_optimizer));
    const std::string blocks = std::to_string(recorded) + (recorded == 1 ? " slot block" : " slot blocks");
    if (recorded >= 0 && file_slots != recorded * file_trainable)
      return Corruption("checkpoint " + path + ": its optimizer " + file_optimizer + " keeps " + blocks +
                        ", but the slot record holds " + std::to_string(file_slots) + " values for " +
                        std::to_string(file_trainable) + " trainable values");
    const std::string named =
        recorded >= 0 ? "the checkpoint's optimizer is " + file_optimizer + " with " + blocks + "; " : "";
    if (differs == nullptr && slots.size() != slot_block->nbytes())
      return InvalidArgument("checkpoint " + path + ": " + std::to_string(file_slots) +
                             " optimizer slot values, the model's optimizer has " +
                             std::to_string(slot_block->num_elements()) + " (" + named + "a different optimizer?)");
    // Remapping: the number of slot blocks (1 for SGD with momentum, 2 for Adam) must agree
    // wherever both sides have trainable variables to tell it.
    file_blocks = recorded >= 0 ? recorded : file_trainable > 0 ? file_slots / file_trainable : -1;
    model_blocks = model_trainable > 0 ? slot_block->num_elements() / model_trainable : -1;
    if (differs != nullptr &&
        ((file_trainable > 0 && file_slots % file_trainable != 0) || (file_trainable == 0 && file_slots != 0) ||
         (file_blocks >= 0 && model_blocks >= 0 && file_blocks != model_blocks)))
      return InvalidArgument("checkpoint " + path + ": " + std::to_string(file_slots) + " optimizer slot values for " +
                             std::to_string(file_trainable) + " trainable values do not match the model's optimizer (" +
                             std::to_string(slot_block->num_elements()) + " slot values for " +
                             std::to_string(model_trainable) + " trainable values; " + named +
                             "a different optimizer?)");
  }

  // Everything checked: only now does the model change.
  for (const Copy& c : plan)
    std::memcpy(store->params().data<float>() + c.to, params.data() + c.from * 4, static_cast<size_t>(c.size) * 4);
  if (options.weights_only) {
    // The slots stay the model's.
  } else if (differs == nullptr) {
    if (!slots.empty()) std::memcpy(slot_block->raw_data(), slots.data(), slots.size());
  } else if (model_blocks > 0) {
    // In the file and in the model, a trainable variable's slots lie at its parameter offset
    // within each block (trainable variables come first in both blocks).
    float* to = slot_block->data<float>();
    std::memset(to, 0, slot_block->nbytes());
    const auto* from = reinterpret_cast<const float*>(slots.data());
    for (const Copy& c : plan) {
      if (!c.trainable_in_file || !c.trainable_in_model || file_blocks <= 0) continue;
      for (int64_t b = 0; b < model_blocks; ++b)
        std::memcpy(to + b * model_trainable + c.to, from + b * file_trainable + c.from, static_cast<size_t>(c.size) * 4);
    }
    if (options.average_block >= 0 && options.average_block < model_blocks)
      for (const Copy& c : plan)
        if (c.trainable_in_model && (!c.trainable_in_file || file_blocks <= 0))
          std::memcpy(to + options.average_block * model_trainable + c.to, params.data() + c.from * 4,
                      static_cast<size_t>(c.size) * 4);
  }
  *state = std::move(loaded);
  return Status::OK();
}

Result<CheckpointState> ReadCheckpointHeader(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto r, record::RecordReader::Open(path));
  std::string bytes;
  Status s = r->ReadRecord(&bytes);
  if (s.IsOutOfRange()) return Corruption("checkpoint " + path + ": empty, no header record");
  STRATA_RETURN_IF_ERROR(s.WithContext("checkpoint " + path + " header"));
  STRATA_ASSIGN_OR_RETURN(const nlohmann::json header, ParseHeader(path, bytes));
  return StateFromHeader(path, header);
}

bool IsCheckpointFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  auto r = record::RecordReader::Open(path);
  if (!r.ok()) return false;
  std::string header;
  if (!(*r)->ReadRecord(&header).ok()) return false;
  auto h = nlohmann::json::parse(header, nullptr, false);
  return h.is_object() && h.contains("format") && h["format"] == "strata-checkpoint";
}

// ---- a MultiWorker backup's input positions (record 3) ---------------------------------------

bool IsPackedWorkerStates(std::string_view record) {
  return record.substr(0, kWorkerStates.size()) == kWorkerStates;
}

std::string PackWorkerStates(const std::vector<std::string>& states) {
  std::string out = std::string(kWorkerStates) + std::to_string(states.size()) + "\n";
  for (const std::string& s : states) out += std::to_string(s.size()) + "\n" + s;
  return out;
}

Result<std::string> WorkerIteratorState(const std::string& path, std::string_view packed, int worker, int workers) {
  auto bad = [&](const std::string& why) {
    return Corruption(path + ": the backup's input positions: " + why);
  };
  auto number = [&](int64_t* v) -> bool {
    const size_t nl = packed.find('\n');
    if (nl == std::string_view::npos || nl == 0 || nl > 19) return false;
    *v = 0;
    for (char c : packed.substr(0, nl)) {
      if (c < '0' || c > '9') return false;
      *v = *v * 10 + (c - '0');
    }
    packed.remove_prefix(nl + 1);
    return true;
  };
  if (!IsPackedWorkerStates(packed))
    return bad("written by one worker, restored by " + std::to_string(workers) + " (run with the same worker count)");
  packed.remove_prefix(kWorkerStates.size());
  int64_t count = 0;
  if (!number(&count)) return bad("no worker count");
  if (count != workers)
    return bad("written by " + std::to_string(count) + " workers, restored by " + std::to_string(workers) +
               " (run with the same worker count)");
  for (int w = 0; w < workers; ++w) {
    int64_t len = 0;
    if (!number(&len) || static_cast<size_t>(len) > packed.size()) return bad("worker " + std::to_string(w) + "'s is truncated");
    if (w == worker) return std::string(packed.substr(0, static_cast<size_t>(len)));
    packed.remove_prefix(static_cast<size_t>(len));
  }
  return bad("no entry for worker " + std::to_string(worker));
}

}  // namespace strata::keras
