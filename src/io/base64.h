// Base64 (RFC 4648, with padding): binary blobs (a tokenizer model) inside text metadata.
#pragma once

#include <string>
#include <string_view>

namespace gmlp {

std::string base64_encode(std::string_view bytes);
// Throws gmlp::Error naming `what` on a character outside the alphabet or a bad length.
std::string base64_decode(std::string_view text, const std::string& what);

}  // namespace gmlp
