// libFuzzer harness: the text corpora (src/text/corpus.h): the KJV parser (the `bible` program's
// output format, from memory) and the plain-text reader (one document a line; it reads a path,
// so the input is also an in-memory file), then the splits of what they return.
#include "fuzz.h"
#include "text/corpus.h"

using namespace gmlp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_view(data, size);
  fuzz::run([&] {
    const auto verses = text::parse_kjv(text, "fuzz");
    for (text::Split s : {text::Split::train, text::Split::dev, text::Split::test})
      text::verse_texts(verses, s), text::count_verses(verses, s);
  });
  static fuzz::MemFile file("corpus.txt");
  file.set(text);
  fuzz::run([&] {
    const auto lines = text::load_lines(file.path());
    for (text::Split s : {text::Split::train, text::Split::dev, text::Split::test}) text::lines_in_split(lines, s);
  });
  return 0;
}
