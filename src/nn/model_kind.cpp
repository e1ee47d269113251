#include "nn/model_kind.h"

#include <nlohmann/json.hpp>
#include <ostream>

#include "core/error.h"

namespace gmlp {

namespace {

const ModelKindInfo* find(std::string_view name) {
  for (const ModelKindInfo& row : kModelKindTable)
    if (name == row.name) return &row;
  return nullptr;
}

}  // namespace

std::vector<ModelKind> model_kinds(Domain domain) {
  std::vector<ModelKind> out;
  for (const ModelKindInfo& row : kModelKindTable)
    if (model_kind_serves(row.kind, domain)) out.push_back(row.kind);
  return out;
}

std::string model_kind_names(Domain domain) {
  std::string out;
  for (const ModelKind kind : model_kinds(domain))
    out += (out.empty() ? "" : ", ") + std::string(model_kind_name(kind));
  return out;
}

ModelKind parse_model_kind(std::string_view name, Domain domain) {
  const ModelKindInfo* row = find(name);
  if (!row || !model_kind_serves(row->kind, domain))
    fail("invalid ", domain == Domain::text ? "text model config" : "model config", ": model must be one of ",
         model_kind_names(domain), " (got ", shown(name), ")");
  return row->kind;
}

void to_json(nlohmann::json& j, ModelKind kind) { j = model_kind_name(kind); }

void from_json(const nlohmann::json& j, ModelKind& kind) {
  const std::string name = j.get<std::string>();  // a non-string: json's type_error
  const ModelKindInfo* row = find(name);
  if (!row) {
    std::string all;
    for (const ModelKindInfo& r : kModelKindTable) all += (all.empty() ? "" : ", ") + std::string(r.name);
    fail("invalid model kind ", shown(name), ": expected one of ", all);
  }
  kind = row->kind;
}

std::ostream& operator<<(std::ostream& os, ModelKind kind) { return os << model_kind_name(kind); }

}  // namespace gmlp
