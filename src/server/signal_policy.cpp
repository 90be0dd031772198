#include "server/signal_policy.h"

#include <csignal>

namespace strata {

SignalAction signal_action(int sig, bool loading, int terms_before) {
  if (loading) return SignalAction::Exit;
  if (sig == SIGTERM && terms_before == 0) return SignalAction::Drain;
  return SignalAction::Stop;
}

}  // namespace strata
