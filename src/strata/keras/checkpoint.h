// Checkpoints: weights, optimizer state, step, epoch and the input iterator's position in
// one file, written atomically. The file is a TFRecord file (CRC-checked framing for free)
// of four records; docs/formats/checkpoint.md has the byte layout:
//   0  header: JSON {"format": "strata-checkpoint", "version": 1, "global_step", "epoch",
//      "params": n, "slots": m, "variables": [{name, shape, role, offset, size}, ...],
//      "optimizer": {what the slots belong to}, "model": {what the weights belong to}}
//   1  parameters: n little-endian f32 (trainable, then state such as moving statistics)
//   2  optimizer slots: m little-endian f32 (blocks parallel to the trainable parameters)
//   3  iterator state: opaque bytes from data::Iterator::Save (may be empty)
// This file is the format's one home: everything that writes or reads a checkpoint goes
// through it, and every part of the header is written by the one WriteCheckpoint call.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/backend/compile.h"
#include "strata/core/status.h"
#include "strata/keras/optimizers.h"

namespace strata::keras {

struct CheckpointState {
  int64_t global_step = 0;
  int64_t epoch = 0;        // the next epoch to run
  int64_t step_in_epoch = 0;  // steps of `epoch` already done
  std::string iterator_state;
  std::string extra_json = "{}";  // callbacks' state (best metric so far, ...)
  // What the weights belong to: a JSON object the caller describes its model with (the one
  // `strata train` records is train::ModelInfoJson's), so that a program can rebuild the model
  // from the file alone; empty: none. Written as the header's "model"; read back from there or,
  // in a file written before the header had it, from "extra"."model".
  std::string model_json;
  // Read only: the header's "optimizer" (OptimizerJson of the optimizer the slots belong to;
  // WriteCheckpoint takes the optimizer itself), empty in a file written before it was recorded.
  std::string optimizer_json;
};

// What the header records of an optimizer: its Keras name, how many slot blocks it keeps (the
// layout of record 2) and the hyperparameters of its update, e.g.
//   {"name": "SGD", "slot_blocks": 1, "momentum": 0.9, "nesterov": true, "weight_decay": 0, ...}
std::string OptimizerJson(const Optimizer& optimizer);

// Atomic: the bytes go to a temporary beside `path`, which is fsynced and renamed onto `path`;
// a crash at any point leaves the previous file under `path` whole. `before_publish`, when
// given, runs once every byte is handed to the OS and before the fsync and rename (the
// backup's fault point, keras/fault_point.h). `slots` are `optimizer`'s; `state.model_json`,
// when given, must be a JSON object.
Status WriteCheckpoint(const std::string& path, const backend::VariableStore& store, const Optimizer& optimizer,
                       const Tensor& slots, const CheckpointState& state,
                       const std::function<void()>& before_publish = nullptr);
struct ReadCheckpointOptions {
  // Which variables are trainable (frozen layers) decides the layout of the optimizer slots.
  // false (resume): a variable trainable in the file but not in the model, or the reverse, is an
  // error naming it. true (load_weights): the slots of the variables trainable in both are
  // carried over, a variable trainable only in the model starts with zero slots.
  bool remap_slots = false;
  // The parameters and moving statistics only (inference): the optimizer slots are neither
  // checked nor copied, so `slots` may be null and the model's optimizer any. Every record is
  // still read and CRC-checked.
  bool weights_only = false;
  // With remap_slots: the slot block holding a moving average of the weights (Keras's use_ema,
  // the last block; -1: none). A variable trainable only in the model starts its average at its
  // weights, not at zero.
  int average_block = -1;
};

// Loads into `store` and `slots`: every variable must exist with the same shape and the
// slot block must have the same size (errors name what differs). Nothing changes unless the
// whole file checks out.
Status ReadCheckpoint(const std::string& path, backend::VariableStore* store, Tensor* slots, CheckpointState* state,
                      ReadCheckpointOptions options = {});
// The header alone (record 0): step, epoch, extra, model and optimizer; no iterator state.
Result<CheckpointState> ReadCheckpointHeader(const std::string& path);
// True when `path` is a file whose first record is a Strata checkpoint header.
bool IsCheckpointFile(const std::string& path);

// A backup written by W > 1 workers (MultiWorker BackupAndRestore) holds every worker's input
// position in record 3: "strata-workers W\n", then per worker in rank order its length in
// decimal, "\n" and its iterator state.
std::string PackWorkerStates(const std::vector<std::string>& states);
bool IsPackedWorkerStates(std::string_view record);
// Worker `worker`'s position from a record 3 restored by `workers` workers: a record written
// by another worker count (one worker included) or cut short is Corruption naming `path` and
// both counts.
Result<std::string> WorkerIteratorState(const std::string& path, std::string_view packed, int worker, int workers);

}  // namespace strata::keras

#pragma GCC visibility pop
