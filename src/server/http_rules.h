// The HTTP rules strata's server applies to a request's head before anything else (issue 29),
// as pure functions: framing that a proxy could read differently (RFC 9112 §6), a body without
// a length, and the API key (its scheme in any case, compared in constant time).
#pragma once

#include <httplib.h>

#include <string>
#include <string_view>

namespace strata {

bool equals_ignoring_case(std::string_view a, std::string_view b);

// Whether `a` equals `b` in a time that depends on their lengths only, not on where they differ
// (a key guessed byte by byte from response times).
bool equals_in_constant_time(std::string_view a, std::string_view b);

// "Bearer KEY" with the scheme in any case (RFC 9110 §11.1) and the key compared in constant
// time.
bool bearer_matches(std::string_view value, std::string_view key);

// Why the request's framing headers are refused (400), or "": more than one Content-Length,
// Transfer-Encoding, Host or Authorization; a Content-Length that is not digits; both length
// headers.
std::string framing_problem(const httplib::Request& req);

// A POST, PUT or PATCH with neither Content-Length nor Transfer-Encoding (411): its body would
// end only with the connection.
bool lacks_length(const httplib::Request& req);

}  // namespace strata
