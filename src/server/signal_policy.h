// What SIGINT and SIGTERM do to `strata serve`, by phase: while the model loads nothing runs,
// so either ends the process at once (a load can take minutes, and waiting for it ignored the
// signal: 4-13 s seen); once serving, the first SIGTERM drains (what runs finishes, nothing new
// starts) and a second SIGTERM, or SIGINT, stops.
#pragma once

namespace strata {

enum class SignalAction { Exit, Drain, Stop };

SignalAction signal_action(int sig, bool loading, int terms_before);

}  // namespace strata
