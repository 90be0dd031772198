# Sourced by the shell tests that drive `strata serve`: starts it on a random free port (five
# tries, as a port may be taken between choosing and binding) and waits for its "serving" line.
#   serve_on_free_port LOG STRATA ARGS...   sets $port and $pid; fails with the log otherwise
serve_on_free_port() {
  _log=$1
  shift
  for _attempt in 1 2 3 4 5; do
    port=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000 ))
    "$@" --port "$port" 2>"$_log" &
    pid=$!
    for _i in $(seq 1 100); do
      grep -q "^serving" "$_log" && return 0
      kill -0 $pid 2>/dev/null || break
      sleep 0.05
    done
    wait $pid 2>/dev/null || true
  done
  cat "$_log"
  return 1
}
