#include "strata/backend/cpu/planner.h"

#include <sstream>

namespace strata::backend::cpu {

using graph::Value;

dt ToDnnl(DType t) {
  switch (t) {
    case DType::kF32: return dt::f32;
    case DType::kBF16: return dt::bf16;
    case DType::kI32: return dt::s32;
    case DType::kU8: return dt::u8;
    case DType::kI64: return dt::undef;
  }
  return dt::undef;
}

DType FromDnnl(dt t) {
  switch (t) {
    case dt::bf16: return DType::kBF16;
    case dt::s32: return DType::kI32;
    case dt::u8: return DType::kU8;
    default: return DType::kF32;
  }
}

md PlainDesc(const Shape& s, dt type) {
  if (s.rank() == 0) return md({1}, type, dnnl::memory::dims{1});
  if (s.rank() == 4) {
    const int64_t N = s[0], H = s[1], W = s[2], C = s[3];
    return md({N, C, H, W}, type, dnnl::memory::dims{H * W * C, 1, W * C, C});
  }
  return RowMajorDesc(dnnl::memory::dims(s.dims().begin(), s.dims().end()), type);
}

md RowMajorDesc(const dnnl::memory::dims& dims, dt type) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  return md(dims, type, strides);
}

md WeightsView(const Shape& k, int groups, dt type) {
  const int64_t KH = k[0], KW = k[1], I = k[2], O = k[3];
  if (groups == 1) return md({O, I, KH, KW}, type, dnnl::memory::dims{1, O, KW * I * O, I * O});
  const int64_t G = groups, OG = O / G;
  return md({G, OG, I, KH, KW}, type, dnnl::memory::dims{OG, 1, O, KW * I * O, I * O});
}

static md WithType(const md& d, dt type) {
  dnnl_memory_desc_t c = d.data;
  c.data_type = static_cast<dnnl_data_type_t>(type);
  return md(c);
}

std::string DescString(const md& d) {
  std::ostringstream os;
  const dt t = d.data_type();
  os << (t == dt::f32 ? "f32" : t == dt::bf16 ? "bf16" : t == dt::s32 ? "s32" : "?") << "[";
  dnnl::memory::dims dims = d.dims();
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? "," : "") << dims[i];
  os << "]";
  const dnnl_memory_desc_t& c = d.data;
  if (c.format_kind == dnnl_blocked && c.format_desc.blocking.inner_nblks > 0) {
    os << ":blk";
    for (int i = 0; i < c.format_desc.blocking.inner_nblks; ++i)
      os << c.format_desc.blocking.inner_blks[i] << static_cast<char>('a' + c.format_desc.blocking.inner_idxs[i]);
  }
  return os.str();
}

Planner::Planner(const graph::Graph& g, const CompileOptions& o, VariableStore& vars, dnnl::engine& eng)
    : g_(g), o_(o), vars_(vars), eng_(eng) {}

dnnl::primitive_attr Planner::Attr() const {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

void Planner::NoteScratchpad(const dnnl::primitive_desc_base& pd) {
  scratchpad_bytes = std::max(scratchpad_bytes, pd.scratchpad_desc().get_size());
}

int Planner::NewBuffer(int64_t bytes, char* external) {
  Buffer b;
  b.bytes = std::max<int64_t>(bytes, 1);
  b.external = external;
  buffers_.push_back(b);
  return static_cast<int>(buffers_.size() - 1);
}

void Planner::Extend(int b, int pos) {
  Buffer& buf = buffers_[b];
  buf.first = buf.first < 0 ? pos : std::min(buf.first, pos);
  buf.last = std::max(buf.last, pos);
}

int Planner::Append(Kernel k) {
  const int pos = position();
  for (int b : pending_) Extend(b, pos);
  for (const auto& [arg, b, d] : k.dnnl_args)
    if (b >= 0) Extend(b, pos);
  for (int b : k.bufs) Extend(b, pos);
  pending_.clear();
  kernels_.push_back(std::move(k));
  return pos;
}

const md& Planner::PrimaryDesc(Value v) const { return mats_.at(Key(v)).front().desc; }

Result<int> Planner::Reorder(int src_buf, const md& src, const md& dst, const std::string& what) {
  const int out = NewBuffer(static_cast<int64_t>(dst.get_size()));
  auto pd = dnnl::reorder::primitive_desc(eng_, src, eng_, dst, Attr());
  NoteScratchpad(pd);
  Kernel k;
  k.info = {what, "reorder", pd.impl_info_str(), DescString(src) + " -> " + DescString(dst), 0, 0};
  k.prim = dnnl::reorder(pd);
  k.dnnl_args = {{DNNL_ARG_FROM, src_buf, src}, {DNNL_ARG_TO, out, dst},
                 {DNNL_ARG_SCRATCHPAD, -2, pd.scratchpad_desc()}};
  auto saved = std::move(pending_);
  pending_.clear();
  Append(std::move(k));
  pending_ = std::move(saved);
  return out;
}

Result<int> Planner::Use(Value v, const md& want, std::optional<md> view) {
  auto it = mats_.find(Key(v));
  if (it == mats_.end()) return Internal(g_.Describe(v) + " is used before it is computed");
  std::vector<Materialization>& ms = it->second;
  for (const Materialization& m : ms)
    if (m.desc == want) {
      Touch(m.buffer);
      return m.buffer;
    }
  const std::string what = g_.node(v.node).name + "/reorder";
  if (!view && ms.front().desc.dims() == want.dims()) {
    STRATA_ASSIGN_OR_RETURN(int b, Reorder(ms.front().buffer, ms.front().desc, want, what));
    ms.push_back({want, b, false});
    Touch(b);
    return b;
  }
  // Through the plain layout, seen in the consumer's dims.
  const Materialization* plain = nullptr;
  for (const Materialization& m : ms)
    if (m.plain) plain = &m;
  if (plain == nullptr) {
    const md pd = PlainDesc(v.shape(), ms.front().desc.data_type());
    STRATA_ASSIGN_OR_RETURN(int b, Reorder(ms.front().buffer, ms.front().desc, pd, what));
    ms.push_back({pd, b, true});
    plain = &ms.back();
  }
  const md src = view ? WithType(*view, plain->desc.data_type()) : plain->desc;
  const int plain_buf = plain->buffer;
  if (src == want) {
    ms.push_back({want, plain_buf, false});
    Touch(plain_buf);
    return plain_buf;
  }
  STRATA_ASSIGN_OR_RETURN(int b, Reorder(plain_buf, src, want, what));
  ms.push_back({want, b, false});
  Touch(b);
  return b;
}

int Planner::Define(Value v, const md& d, std::optional<md> view) {
  auto pin = pinned_.find(Key(v));
  if (pin != pinned_.end()) {
    const auto& [pbuf, plain] = pin->second;
    const md target = view ? WithType(*view, plain.data_type()) : plain;
    if (target == d) {
      Touch(pbuf);
      mats_[Key(v)].push_back({plain, pbuf, true});
      if (view) mats_[Key(v)].push_back({d, pbuf, false});
      return pbuf;
    }
    const int tmp = NewBuffer(static_cast<int64_t>(d.get_size()));
    Touch(tmp);
    mats_[Key(v)].push_back({d, tmp, false});
    pending_copies_.push_back({v, tmp, d, target});
    return tmp;
  }
  const int b = NewBuffer(static_cast<int64_t>(d.get_size()));
  Touch(b);
  const md canonical = PlainDesc(v.shape(), d.data_type());
  if (view && !(d == canonical) && d == WithType(*view, d.data_type())) {
    // The kernel writes v's plain bytes, seen in its own dims.
    mats_[Key(v)].push_back({canonical, b, true});
    mats_[Key(v)].push_back({d, b, false});
    return b;
  }
  mats_[Key(v)].push_back({d, b, d == canonical});
  return b;
}

void Planner::Alias(Value v, const md& d, int b) {
  mats_[Key(v)].push_back({d, b, d == PlainDesc(v.shape(), d.data_type())});
}

Status Planner::FinishOutputs() {
  auto copies = std::move(pending_copies_);
  pending_copies_.clear();
  for (const auto& [v, tmp, from, to] : copies) {
    const auto& [pbuf, plain] = pinned_.at(Key(v));
    auto pd = dnnl::reorder::primitive_desc(eng_, from, eng_, to, Attr());
    NoteScratchpad(pd);
    Kernel k;
    k.info = {g_.node(v.node).name + "/to_block", "reorder", pd.impl_info_str(),
              DescString(from) + " -> " + DescString(to), 0, 0};
    k.prim = dnnl::reorder(pd);
    k.dnnl_args = {{DNNL_ARG_FROM, tmp, from}, {DNNL_ARG_TO, pbuf, to}, {DNNL_ARG_SCRATCHPAD, -2, pd.scratchpad_desc()}};
    auto saved = std::move(pending_);
    pending_.clear();
    Append(std::move(k));
    pending_ = std::move(saved);
    mats_[Key(v)].push_back({plain, pbuf, true});
  }
  return Status::OK();
}

void Planner::Pin(Value v, char* ptr, dt type) {
  const md plain = PlainDesc(v.shape(), type);
  const int b = NewBuffer(static_cast<int64_t>(plain.get_size()), ptr);
  pinned_[Key(v)] = {b, plain};
  if (graph::IsLeaf(g_.node(v.node).kind)) mats_[Key(v)].push_back({plain, b, true});
}

Status Planner::Guard(int node, const std::function<Status()>& f) {
  const graph::Node& n = g_.node(node);
  auto context = [&] {
    std::string s = graph::OpLabel(n.name, n.kind) + "inputs";
    for (const Value& in : n.inputs) s += " " + std::string(DTypeName(in.dtype())) + in.shape().ToString();
    return s;
  };
  try {
    Status st = f();
    return st.ok() ? st : st.WithContext(context());
  } catch (const dnnl::error& e) {
    return Internal(context() + ": oneDNN error " + std::to_string(static_cast<int>(e.status)) + ": " + e.what());
  } catch (const std::exception& e) {
    return Internal(context() + ": " + e.what());
  }
}

}  // namespace strata::backend::cpu
