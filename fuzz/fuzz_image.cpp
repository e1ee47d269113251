// libFuzzer harness: image decoding (src/io/image.h): PNG through libpng, JPEG through
// libjpeg-turbo, binary PGM/PPM through gmlp's own reader, then the conversion to floats and the
// resize that load_image applies (through an in-memory file, as load_image takes a path).
// Sides are capped at 1024 rather than 8192 so that a header declaring a huge image costs
// megabytes, not hundreds of them, per run; the code paths are the same.
#include "fuzz.h"
#include "io/image.h"

using namespace gmlp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::run([&] {
    const img::Pixels px = img::decode_image("fuzz.img", data, size, 1024);
    if (px.hwc.size() != size_t(px.width) * px.height * px.channels || (px.channels != 1 && px.channels != 3)) {
      std::fprintf(stderr, "gmlp fuzz: decode_image returned %dx%dx%d with %zu bytes\n", px.width, px.height,
                   px.channels, px.hwc.size());
      std::abort();
    }
    // Small images also go through load_image: float conversion, gray <-> RGB, resizing.
    if (size_t(px.width) * px.height <= 64 * 64) {
      static fuzz::MemFile file("image");
      file.set(data, size);
      img::load_image(file.path(), 1, 7, 5);
      img::load_image(file.path(), 3, px.height, px.width);
    }
  });
  return 0;
}
