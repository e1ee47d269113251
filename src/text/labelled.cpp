#include "text/labelled.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::text {

namespace {

constexpr size_t kMaxFileBytes = size_t(1) << 30;  // 1 GiB, as a pretraining corpus

enum class Format { tsv, csv, jsonl };

Format format_of(const std::string& path) {
  auto ends = [&](const char* ext) {
    const std::string e(ext);
    return path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".tsv")) return Format::tsv;
  if (ends(".csv")) return Format::csv;
  if (ends(".jsonl")) return Format::jsonl;
  fail("failed to read '", path, "': expected a .tsv, .csv or .jsonl file of labelled texts");
}

// The records of a TSV (fields split at tabs, no quoting) or a CSV (RFC 4180: fields split at
// commas, a field in double quotes may hold commas, newlines and "" for a quote), each with the
// line it starts on. A final \r of a line is dropped; blank lines are skipped.
struct Record {
  std::vector<std::string> fields;
  int64_t line;
};

std::vector<Record> split_records(const std::string& data, Format f, const std::string& path) {
  std::vector<Record> out;
  const char sep = f == Format::tsv ? '\t' : ',';
  int64_t line = 1;
  size_t i = 0;
  while (i < data.size()) {
    Record r{{}, line};
    std::string field;
    bool quoted = false, any = false;
    for (; i < data.size(); ++i) {
      const char c = data[i];
      if (quoted) {
        if (c == '"' && i + 1 < data.size() && data[i + 1] == '"') {
          field += '"', ++i;
        } else if (c == '"') {
          quoted = false;
        } else {
          if (c == '\n') ++line;
          field += c;
        }
        continue;
      }
      if (f == Format::csv && c == '"' && field.empty()) {
        quoted = true, any = true;
      } else if (c == sep) {
        r.fields.push_back(std::move(field)), field.clear(), any = true;
      } else if (c == '\n') {
        ++i, ++line;
        break;
      } else if (c != '\r' || (i + 1 < data.size() && data[i + 1] != '\n')) {
        field += c, any = any || c != '\r';
      }
    }
    if (quoted) fail("failed to read '", path, "': line ", r.line, ": a quoted field is not closed");
    if (!any && field.empty()) continue;  // a blank line
    r.fields.push_back(std::move(field));
    out.push_back(std::move(r));
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

void check_row(const LabelledRow& r, const LabelledColumns& c, const std::string& path) {
  if (r.text.empty()) fail("failed to read '", path, "': line ", r.line, ": the text ('", c.text, "') is empty");
  if (!c.pair.empty() && r.pair.empty())
    fail("failed to read '", path, "': line ", r.line, ": the second text ('", c.pair, "') is empty");
  if (r.label.empty()) fail("failed to read '", path, "': line ", r.line, ": the label ('", c.label, "') is empty");
}

std::vector<LabelledRow> from_table(const std::string& data, Format f, const LabelledColumns& c,
                                    const std::string& path) {
  const std::vector<Record> records = split_records(data, f, path);
  if (records.empty()) fail("failed to read '", path, "': the file is empty (expected a header row, then rows)");
  const std::vector<std::string>& header = records[0].fields;
  auto column = [&](const std::string& name) -> size_t {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      fail("failed to read '", path, "': the header has no column '", name, "' (its columns: ", joined(header), ")");
    return size_t(it - header.begin());
  };
  const size_t t = column(c.text), l = column(c.label), p = c.pair.empty() ? 0 : column(c.pair);
  std::vector<LabelledRow> rows;
  for (size_t k = 1; k < records.size(); ++k) {
    const Record& r = records[k];
    if (r.fields.size() != header.size())
      fail("failed to read '", path, "': line ", r.line, ": expected ", header.size(),
           " fields as the header has, found ", r.fields.size());
    LabelledRow row{r.fields[t], c.pair.empty() ? std::string() : r.fields[p], r.fields[l], r.line};
    check_row(row, c, path);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<LabelledRow> from_jsonl(const std::string& data, const LabelledColumns& c, const std::string& path) {
  std::vector<LabelledRow> rows;
  int64_t line = 0;
  for (size_t at = 0; at < data.size();) {
    const size_t end = std::min(data.find('\n', at), data.size());
    std::string text = data.substr(at, end - at);
    at = end + 1, ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object())
      fail("failed to read '", path, "': line ", line, ": expected a JSON object, found '", text.substr(0, 60),
           text.size() > 60 ? "...'" : "'");
    auto field = [&](const std::string& key, bool is_label) -> std::string {
      if (!j.contains(key)) fail("failed to read '", path, "': line ", line, ": the object has no key '", key, "'");
      const nlohmann::json& v = j[key];
      if (v.is_string()) return v.get<std::string>();
      if (is_label && (v.is_number_integer() || v.is_boolean())) return v.dump();  // 0/1, true/false labels
      fail("failed to read '", path, "': line ", line, ": expected '", key, "' to be a string",
           is_label ? " or an integer" : "", ", found ", v.type_name());
    };
    LabelledRow row{field(c.text, false), c.pair.empty() ? std::string() : field(c.pair, false), field(c.label, true),
                    line};
    check_row(row, c, path);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

std::vector<LabelledRow> read_labelled(const std::string& path, const LabelledColumns& columns) {
  const Format f = format_of(path);
  const std::string data = read_file(path, kMaxFileBytes);
  std::vector<LabelledRow> rows =
      f == Format::jsonl ? from_jsonl(data, columns, path) : from_table(data, f, columns, path);
  if (rows.empty()) fail("failed to read '", path, "': no labelled rows (expected at least one after the header)");
  return rows;
}

std::vector<std::string> label_set(const std::vector<LabelledRow>& rows) {
  std::vector<std::string> labels;
  labels.reserve(rows.size());
  for (const LabelledRow& r : rows) labels.push_back(r.label);
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  return labels;
}

std::vector<Example> labelled_examples(const std::vector<LabelledRow>& rows, const std::vector<std::string>& classes,
                                       const Tokenizer& tok, int seq_len, const std::string& path) {
  std::vector<Example> out;
  out.reserve(rows.size());
  for (const LabelledRow& r : rows) {
    const auto it = std::lower_bound(classes.begin(), classes.end(), r.label);
    if (it == classes.end() || *it != r.label)
      fail("failed to read '", path, "': line ", r.line, ": label '", r.label, "' is not one of the training file's (",
           joined(classes), ")");
    const std::vector<int32_t> a = tok.encode(r.text);
    out.push_back({r.pair.empty() ? single_segment(a, seq_len) : segment_pair(a, tok.encode(r.pair), seq_len),
                   int(it - classes.begin())});
  }
  return out;
}

}  // namespace gmlp::text
