// libhdf5 as the Keras weight files use it (h5_weights.cc reads, h5_weights_save.cc writes):
// the library lock, handles that close themselves, link tests, and the model's layers in
// Keras's terms (names, weight order). Internal: the only headers that include <hdf5.h>.
#pragma once

#include <hdf5.h>

#include <cctype>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "strata/keras/model.h"

namespace strata::keras::h5 {

// libhdf5 (Debian's serial build) is not thread-safe: every use goes through this lock, which
// also turns off the library's own error printing for the duration (errors become Status).
inline std::mutex& Hdf5Mutex() {
  static std::mutex mu;
  return mu;
}

class Hdf5Scope {
 public:
  Hdf5Scope() : lock_(Hdf5Mutex()) {
    H5Eget_auto2(H5E_DEFAULT, &old_fn_, &old_data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~Hdf5Scope() { H5Eset_auto2(H5E_DEFAULT, old_fn_, old_data_); }

 private:
  std::lock_guard<std::mutex> lock_;
  H5E_auto2_t old_fn_ = nullptr;
  void* old_data_ = nullptr;
};

// The innermost message of libhdf5's error stack ("truncated file: eof = ..."), or "".
inline std::string Hdf5Message() {
  std::string msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD,
           [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
             auto* s = static_cast<std::string*>(out);
             if (n == 0 && e->desc) *s = e->desc;
             return 0;
           },
           &msg);
  H5Eclear2(H5E_DEFAULT);
  return msg;
}

// One libhdf5 handle, closed with its kind's close function.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      Reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  ~Handle() { Reset(); }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  void Reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  hid_t Release() {
    hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

inline Handle File(hid_t id) { return Handle(id, H5Fclose); }
inline Handle Group(hid_t id) { return Handle(id, H5Gclose); }
inline Handle Dataset(hid_t id) { return Handle(id, H5Dclose); }
inline Handle Attribute(hid_t id) { return Handle(id, H5Aclose); }
inline Handle Space(hid_t id) { return Handle(id, H5Sclose); }
inline Handle Type(hid_t id) { return Handle(id, H5Tclose); }
inline Handle Plist(hid_t id) { return Handle(id, H5Pclose); }

inline bool LinkExists(hid_t loc, const std::string& path) {
  // H5Lexists needs every intermediate link to exist: walk the path one name at a time.
  std::string prefix;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    prefix += (prefix.empty() ? "" : "/") + path.substr(start, slash - start);
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (H5Oexists_by_name(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    start = slash + 1;
  }
  return true;
}

inline bool IsGroup(hid_t loc, const std::string& path) {
  if (!LinkExists(loc, path)) return false;
  H5O_info_t info;
  if (H5Oget_info_by_name(loc, path.c_str(), &info, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_GROUP;
}

// Keras's naming.to_snake_case of a class name: "BatchNormalization" -> "batch_normalization",
// "Conv2D" -> "conv2d", "DepthwiseConv2D" -> "depthwise_conv2d".
inline std::string SnakeCase(const std::string& cls) {
  // (.)([A-Z][a-z]+) -> \1_\2
  std::string a;
  for (size_t i = 0; i < cls.size(); ++i) {
    if (i > 0 && std::isupper(static_cast<unsigned char>(cls[i])) && i + 1 < cls.size() &&
        std::islower(static_cast<unsigned char>(cls[i + 1])))
      a += '_';
    a += cls[i];
  }
  // ([a-z])([A-Z]) -> \1_\2, then lower case
  std::string b;
  for (size_t i = 0; i < a.size(); ++i) {
    if (i > 0 && std::islower(static_cast<unsigned char>(a[i - 1])) && std::isupper(static_cast<unsigned char>(a[i])))
      b += '_';
    b += static_cast<char>(std::tolower(static_cast<unsigned char>(a[i])));
  }
  return b;
}

// One model layer with weights, in Keras's terms.
struct ModelLayer {
  std::string name, class_name;
  LayerPtr layer;
  std::string keras3_key;  // "layers/conv2d_1"
  std::vector<const backend::VariableStore::Entry*> vars;  // Keras's order: trainable, then the rest
};

inline std::string ShortName(const std::string& var) { return var.substr(var.rfind('/') + 1); }

// Keras's weights of each layer: trainable first, then non-trainable, each in creation order
// (the variable store's order within a layer). Strata's BatchNormalization keeps gamma and
// beta as constants when scale / center is false; Keras has no such weights then.
// A variable "<layer>/<weight>" belongs to the longest layer name it starts with: a weight name
// may hold slashes too (a MultiHeadAttention's "mha/query/kernel"), and so may a layer's
// ("conv1/conv").
inline std::vector<ModelLayer> ModelLayers(const Model& model) {
  const backend::VariableStore* store = model.variables();
  std::set<std::string> names;
  for (const LayerPtr& layer : model.layers()) names.insert(layer->name());
  std::map<std::string, std::vector<const backend::VariableStore::Entry*>> by_layer;
  for (const auto& e : store->entries()) {
    for (size_t slash = e.name.rfind('/'); slash != std::string::npos && slash > 0; slash = e.name.rfind('/', slash - 1)) {
      if (names.count(e.name.substr(0, slash))) {
        by_layer[e.name.substr(0, slash)].push_back(&e);
        break;
      }
    }
  }
  std::vector<ModelLayer> out;
  std::map<std::string, int> class_count;
  for (const LayerPtr& layer : model.layers()) {
    const std::string snake = SnakeCase(layer->class_name());
    const int n = class_count[snake]++;
    ModelLayer ml;
    ml.name = layer->name();
    ml.class_name = layer->class_name();
    ml.layer = layer;
    ml.keras3_key = "layers/" + snake + (n == 0 ? "" : "_" + std::to_string(n));
    for (const auto* e : by_layer[layer->name()]) ml.vars.push_back(e);
    out.push_back(std::move(ml));
  }
  return out;
}

}  // namespace strata::keras::h5
