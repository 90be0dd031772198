// The chat page strata serve answers GET / with (src/server/web/chat.html, compiled in by
// CMake): static HTML with its style and script inline, so it needs no build step and fetches
// nothing from elsewhere (its Content-Security-Policy, kChatPagePolicy, forbids it).
#pragma once

#include <string_view>

namespace strata {

std::string_view chat_page_html();
// The page may talk only to this server and run only its own inline script and style.
inline constexpr std::string_view kChatPagePolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace strata
