// The shape family on the cpu backend: concat, slice and transpose as oneDNN primitives; reshape, cast and
// identity as aliases of their input's bytes, or a reorder where the output is pinned; gather
// (embeddings) and its gradient as Strata's own loops.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "strata/backend/cpu/ops_internal.h"

namespace strata::backend::cpu::ops {

namespace {

// The channel-blocked layout a concat along channels keeps: the one its first blocked input
// has, where every input and the result are whole blocks of it (DenseNet's dense blocks: the
// growing input, its batch norm and the 1x1 convolution reading it stay blocked, instead of a
// reorder to plain before each concat and one back after it). Inputs in another layout are
// reordered to it. nullopt: plain.
std::optional<ChannelBlockFormat> ConcatBlockFormat(Planner& p, const Node& n, const Shape& out, dt type) {
  if (out.rank() != 4 || n.attrs.axis != 3) return std::nullopt;
  std::optional<ChannelBlockFormat> blocks;
  for (const Value& v : n.inputs) {
    const md& have = p.PrimaryDesc(v);
    if (have.data_type() != type) continue;
    if (std::optional<ChannelBlockFormat> b = WholeChannelBlocks(have, v.shape())) {
      blocks = b;
      break;
    }
  }
  if (!blocks) return std::nullopt;
  for (const Value& v : n.inputs)
    if (v.shape()[3] % blocks->block != 0) return std::nullopt;
  return blocks;
}

}  // namespace

Status PlanConcat(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const dt type = DataDesc(p, n.inputs[0]).data_type();
  const Shape& out = n.out_shapes[0];
  const std::optional<ChannelBlockFormat> blocks = ConcatBlockFormat(p, n, out, type);
  auto layout = [&](const Shape& s) { return blocks ? md(Dims(s), type, blocks->format) : PlainDesc(s, type); };
  std::vector<md> srcs;
  for (const Value& v : n.inputs) srcs.push_back(layout(v.shape()));
  const md dst = layout(out);
  dnnl::concat::primitive_desc pd(dst, DnnlAxis(out.rank(), n.attrs.axis), srcs, p.engine(), p.Attr());
  DnnlArgs args;
  for (size_t j = 0; j < n.inputs.size(); ++j) {
    STRATA_ASSIGN_OR_RETURN(int b, p.Use(n.inputs[j], srcs[j]));
    args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(j), b, srcs[j]});
  }
  args.push_back({DNNL_ARG_DST, p.Define(g.output(i), dst), dst});
  return AppendPrimitive<dnnl::concat>(p, Info(p, i, "concat", pd.impl_info_str()), pd, std::move(args));
}

Status PlanSlice(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const Shape& out = n.out_shapes[0];
  const md have = DataDesc(p, x);
  const dt type = have.data_type();
  // A slice of whole channel blocks reads the blocked layout x has and keeps it (a concat's
  // gradient in DenseNet); anything else is a slice of the plain layout.
  md full = PlainDesc(x.shape(), type), dst = PlainDesc(out, type);
  const int axis = n.attrs.axis;  // the graph keeps it in [0, rank)
  if (const std::optional<ChannelBlockFormat> b = WholeChannelBlocks(have, x.shape());
      b && axis == 3 && n.attrs.begin % b->block == 0 && out[3] % b->block == 0) {
    full = have;
    dst = md(Dims(out), type, b->format);
  }
  dims sub = Dims(out), offsets(sub.size(), 0);
  offsets[DnnlAxis(x.shape().rank(), axis)] = n.attrs.begin;
  const md src = full.submemory_desc(sub, offsets);
  dnnl::reorder::primitive_desc pd(p.engine(), src, p.engine(), dst, p.Attr());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, full));
  const int yb = p.Define(g.output(i), dst);
  return AppendPrimitive<dnnl::reorder>(p, Info(p, i, "slice", pd.impl_info_str()), pd,
                                        {{DNNL_ARG_FROM, xb, src}, {DNNL_ARG_TO, yb, dst}});
}

// Transpose: one reorder that reads x's plain bytes through strides permuted to y's axes.
Status PlanTranspose(Planner& p, int i) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0];
  const dt type = DataDesc(p, x).data_type();
  const Shape& xs = x.shape();
  const std::vector<int>& perm = n.attrs.axes;
  dims x_strides(xs.rank(), 1);
  for (int d = xs.rank() - 2; d >= 0; --d) x_strides[d] = x_strides[d + 1] * xs[d + 1];
  dims strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) strides[d] = x_strides[perm[d]];
  // In the graph's axis order (oneDNN's NCHW order of rank-4 images does not apply to these).
  const dims out_dims(n.out_shapes[0].dims().begin(), n.out_shapes[0].dims().end());
  const md full = PlainDesc(xs, type), dst = RowMajorDesc(out_dims, type);
  const md src(out_dims, type, strides);
  dnnl::reorder::primitive_desc pd(p.engine(), src, p.engine(), dst, p.Attr());
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, full));
  const int yb = p.Define(g.output(i), dst, dst);
  return AppendPrimitive<dnnl::reorder>(p, Info(p, i, "transpose", pd.impl_info_str()), pd,
                                        {{DNNL_ARG_FROM, xb, src}, {DNNL_ARG_TO, yb, dst}});
}

// Gather: each id's row of the table copied; GatherGrad: dy's rows added onto the rows their
// ids name, in the ids' order (one thread: deterministic sums). Ids arrive as int32 (a float id
// is rounded by the reorder that brings it), and one outside the table fails the step.
Status PlanGather(Planner& p, int i, bool grad) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const std::string label = graph::OpLabel(n.name, n.kind);
  const Shape& table = grad ? n.out_shapes[0] : n.inputs[0].shape();
  const int64_t rows = table[0], d = table[1];
  const Value ids = grad ? n.inputs[0] : n.inputs[1];
  const int64_t count = ids.shape().num_elements();
  auto row_of = [=](const int32_t* id, int64_t e, int64_t* row) -> Status {
    if (id[e] < 0 || id[e] >= rows)
      return InvalidArgument(label + "id " + std::to_string(id[e]) + " at element " + std::to_string(e) +
                             " is not a row of the table [0, " + std::to_string(rows) + ")");
    *row = id[e];
    return Status::OK();
  };
  if (!grad)
    return PlanHand(p, i, "gather", {{n.inputs[0], dt::f32}, {ids, dt::s32}}, {g.output(i)},
                    [=](Kernel& k, uint64_t) -> Status {
                      const float* t = Ptr<float>(k, 0);
                      const int32_t* id = Ptr<int32_t>(k, 1);
                      float* y = Ptr<float>(k, 2);
                      for (int64_t e = 0; e < count; ++e) {
                        int64_t row = 0;
                        STRATA_RETURN_IF_ERROR(row_of(id, e, &row));
                        std::memcpy(y + e * d, t + row * d, static_cast<size_t>(d) * sizeof(float));
                      }
                      return Status::OK();
                    });
  return PlanHand(p, i, "gather_bwd", {{ids, dt::s32}, {n.inputs[1], dt::f32}}, {g.output(i)},
                  [=](Kernel& k, uint64_t) -> Status {
                    const int32_t* id = Ptr<int32_t>(k, 0);
                    const float* dy = Ptr<float>(k, 1);
                    float* dt_out = Ptr<float>(k, 2);
                    std::fill(dt_out, dt_out + rows * d, 0.0f);
                    for (int64_t e = 0; e < count; ++e) {
                      int64_t row = 0;
                      STRATA_RETURN_IF_ERROR(row_of(id, e, &row));
                      for (int64_t c = 0; c < d; ++c) dt_out[row * d + c] += dy[e * d + c];
                    }
                    return Status::OK();
                  });
}

// Reshape, Cast, Identity: the output is the input's plain bytes (of type `type`) seen in
// the output's shape; an alias unless the output is pinned to program memory.
Status PlanAliasOrCopy(Planner& p, int i, dt type) {
  const graph::Graph& g = p.graph();
  const Node& n = g.node(i);
  const Value x = n.inputs[0], y = g.output(i);
  const md src = PlainDesc(x.shape(), type);
  STRATA_ASSIGN_OR_RETURN(int xb, p.Use(x, src));
  const md ydesc = PlainDesc(y.shape(), type);
  if (!p.IsPinned(y) && n.kind != OpKind::kIdentity) {
    p.Alias(y, ydesc, xb);
    return Status::OK();
  }
  // A copy: the input's plain bytes are the output's plain bytes (both row-major in graph order).
  const md from = ydesc;
  dnnl::reorder::primitive_desc pd(p.engine(), from, p.engine(), ydesc, p.Attr());
  const int yb = p.Define(y, ydesc);
  return AppendPrimitive<dnnl::reorder>(p, Info(p, i, "copy", pd.impl_info_str()), pd,
                                        {{DNNL_ARG_FROM, xb, from}, {DNNL_ARG_TO, yb, ydesc}});
}

void RegisterShapePlans(PlanTable& t) {
  Register(t, OpKind::kConcat, PlanConcat, kTakesBF16);
  Register(t, OpKind::kSlice, PlanSlice);
  Register(t, OpKind::kTranspose, PlanTranspose, kTakesBF16);
  Register(t, OpKind::kGather, [](Planner& p, int i) { return PlanGather(p, i, false); });
  Register(t, OpKind::kGatherGrad, [](Planner& p, int i) { return PlanGather(p, i, true); });
  Register(t, OpKind::kReshape, [](Planner& p, int i) {
    return PlanAliasOrCopy(p, i, DataDesc(p, p.graph().node(i).inputs[0]).data_type());
  }, kTakesBF16);
  Register(t, OpKind::kIdentity, [](Planner& p, int i) { return PlanAliasOrCopy(p, i, ToDnnl(p.graph().node(i).out_dtypes[0])); });
  Register(t, OpKind::kCast, [](Planner& p, int i) { return PlanAliasOrCopy(p, i, ToDnnl(p.graph().node(i).attrs.dtype)); });
}

}  // namespace strata::backend::cpu::ops
