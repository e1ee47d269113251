// Labelled texts from the user's files (text/labelled.h): the three formats, CSV's quoting, and
// one-line errors naming the file and line.
#include <gtest/gtest.h>

#include <fstream>

#include "files.h"
#include "text/labelled.h"

namespace gmlp::text {
namespace {

std::string write(const std::string& name, const std::string& content) {
  std::string path = test::tmp_path(name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(Labelled, ReadsTsvCsvAndJsonLines) {
  const auto tsv = read_labelled(write("a.tsv", "label\ttext\npos\tgood\r\n\nneg\tbad\n"), {});
  ASSERT_EQ(tsv.size(), 2u);
  EXPECT_EQ(tsv[0].text, "good");
  EXPECT_EQ(tsv[0].label, "pos");
  EXPECT_EQ(tsv[1].line, 4);  // the blank line 3 skipped, counted
  // CSV: a quoted field keeps commas, "" and a newline; the line is where its row starts.
  const auto csv = read_labelled(write("a.csv", "text,label,b\n\"a, \"\"quoted\"\"\nline\",x,1\nplain,y,2\n"),
                                 {"text", "b", "label"});
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_EQ(csv[0].text, "a, \"quoted\"\nline");
  EXPECT_EQ(csv[0].pair, "1");
  EXPECT_EQ(csv[1].line, 4);
  const auto jsonl =
      read_labelled(write("a.jsonl", "{\"text\": \"t\", \"label\": 1}\n{\"text\": \"u\", \"label\": \"z\"}\n"), {});
  ASSERT_EQ(jsonl.size(), 2u);
  EXPECT_EQ(jsonl[0].label, "1");  // an integer label, kept as its text
  EXPECT_EQ(label_set(jsonl), (std::vector<std::string>{"1", "z"}));
}

TEST(Labelled, BadFilesNameTheFileAndLine) {
  const std::string fields = write("fields.csv", "text,label\na,b\nc\n");
  test::expect_error([&] { read_labelled(fields, {}); }, {fields, "line 3", "expected 2 fields", "found 1"});
  const std::string quote = write("quote.csv", "text,label\n\"open,b\n");
  test::expect_error([&] { read_labelled(quote, {}); }, {quote, "line 2", "quoted field is not closed"});
  const std::string column = write("column.tsv", "sentence\tlabel\na\tb\n");
  test::expect_error([&] { read_labelled(column, {}); }, {column, "no column 'text'", "sentence, label"});
  const std::string empty = write("empty.tsv", "text\tlabel\n\tb\n");
  test::expect_error([&] { read_labelled(empty, {}); }, {empty, "line 2", "text ('text') is empty"});
  const std::string json = write("bad.jsonl", "{\"text\": \"a\", \"label\": \"b\"}\n[1, 2]\n");
  test::expect_error([&] { read_labelled(json, {}); }, {json, "line 2", "expected a JSON object"});
  const std::string key = write("key.jsonl", "{\"text\": \"a\"}\n");
  test::expect_error([&] { read_labelled(key, {}); }, {key, "line 1", "no key 'label'"});
  const std::string none = write("none.tsv", "text\tlabel\n");
  test::expect_error([&] { read_labelled(none, {}); }, {none, "no labelled rows"});
  const std::string txt = write("a.txt", "text\tlabel\na\tb\n");
  test::expect_error([&] { read_labelled(txt, {}); }, {txt, ".tsv, .csv or .jsonl"});
}

}  // namespace
}  // namespace gmlp::text
