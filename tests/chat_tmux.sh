#!/bin/sh
# strata chat in a real terminal (tmux): a reply streams and the prompt returns; Ctrl-C during a
# long reply stops that reply (" [stopped]") and the program goes on; /save writes the
# conversation as JSON messages; /reset starts anew; Ctrl-D ends the program with status 0.
# Skipped (77) without tmux.
#   tests/chat_tmux.sh STRATA MODEL WORK_DIR
set -eu
strata=$1 model=$2 work=$3
command -v tmux >/dev/null || { echo "skipped: no tmux"; exit 77; }
mkdir -p "$work"
rm -f "$work/conversation.json" "$work/status"
session="strata-chat-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true' EXIT
# A long context so a reply runs long enough to be interrupted (the model writes ~2000 tok/s).
tmux new-session -d -s "$session" -x 160 -y 60 \
  "'$strata' chat -m '$model' -c 4096 --temp 0 -t 1 --system 'Be brief.'; echo \$? > '$work/status'; sleep 60"
screen() { tmux capture-pane -p -t "$session" -S -2000; }
wait_for() {  # wait_for PATTERN [SECONDS]: until the screen matches (grep -E)
  i=0
  while ! screen | grep -Eq "$1"; do
    i=$((i + 1))
    if [ "$i" -gt $(( ${2:-20} * 20 )) ]; then
      echo "FAILED: waited for /$1/; the screen:"
      screen
      exit 1
    fi
    sleep 0.05
  done
}
wait_for '^chat with .*template' 30
wait_for '^>$'  # tmux trims the prompt's trailing space
tmux send-keys -t "$session" "In the beginning" Enter
# The reply streams; Ctrl-C as soon as it shows, long before its ~4000 tokens are done.
wait_for '^> In the beginning$'
i=0
while [ "$(screen | sed -n '/^> In the beginning$/,$p' | wc -c)" -lt 40 ] && [ "$i" -lt 200 ]; do
  sleep 0.02
  i=$((i + 1))
done
tmux send-keys -t "$session" C-c
wait_for '\[stopped\]' 10
wait_for '^>$' 10
echo "ok: Ctrl-C stopped the reply and the prompt came back"
tmux send-keys -t "$session" "/save $work/conversation.json" Enter
wait_for 'saved 3 messages' 10
python3 - "$work/conversation.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert [x["role"] for x in m] == ["system", "user", "assistant"], m
assert m[1]["content"] == "In the beginning" and m[2]["content"], m
print("ok: /save wrote system, user and the stopped reply")
PY
tmux send-keys -t "$session" "/reset" Enter
wait_for 'a new conversation' 10
tmux send-keys -t "$session" "/save $work/after-reset.json" Enter
wait_for 'saved 1 messages' 10
echo "ok: /reset kept only the system message"
# A whole reply: it streams to its end (EOS, or the context) and a fresh prompt follows it.
last_line() { screen | grep -v '^$' | tail -n 1; }
wait_for_prompt() {  # wait_for_prompt SECONDS WHAT: until the last line is the bare prompt
  i=0
  while [ "$(last_line)" != ">" ]; do
    i=$((i + 1))
    [ "$i" -lt $(( $1 * 20 )) ] || { echo "FAILED: no prompt after $2"; screen; exit 1; }
    sleep 0.05
  done
}
tmux send-keys -t "$session" "Once upon a time" Enter
wait_for '^> Once upon a time$' 10
wait_for_prompt 60 "a whole reply"
screen | sed -n '/^> Once upon a time$/,$p' | sed -n 2p | grep -q '[[:alnum:]]' ||
  { echo "FAILED: the reply is empty"; screen; exit 1; }
echo "ok: a whole reply streamed and the prompt came back"
echo "the terminal (each line cut at 100 characters, a reply at 6 lines):"
screen | grep -v '^$' | awk '/^>|^\(|\[stopped\]|\[the reply/ { n = 0; print substr($0, 1, 100); next }
  { if (++n <= 6) print substr($0, 1, 100); else if (n == 7) print "  ..." }'
# Commands: an unknown one is refused with the list, never sent to the model; Up recalls it.
tmux send-keys -t "$session" "/bogus" Enter
wait_for 'unknown command /bogus .*/reset' 10
tmux send-keys -t "$session" Up
wait_for '^> /bogus$' 10
tmux send-keys -t "$session" Enter
i=0
while [ "$(screen | grep -c 'unknown command /bogus')" -lt 2 ]; do
  i=$((i + 1))
  [ "$i" -lt 200 ] || { echo "FAILED: Up did not recall the last line"; screen; exit 1; }
  sleep 0.05
done
echo "ok: /bogus refused with the list, and Up recalled it (line editing with history)"
tmux send-keys -t "$session" C-d
i=0
while [ ! -s "$work/status" ] && [ "$i" -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
[ "$(cat "$work/status" 2>/dev/null)" = 0 ] || { echo "FAILED: exit status $(cat "$work/status" 2>/dev/null)"; screen; exit 1; }
echo "ok: Ctrl-D ended the chat with status 0"

# Ten turns of short replies in a fresh chat: every turn answered, the oldest turns left out
# (with a note) once the 256-token context is full, never an error.
rm -f "$work/status"
tmux kill-session -t "$session" 2>/dev/null || true
tmux new-session -d -s "$session" -x 160 -y 200 \
  "'$strata' chat -m '$model' --temp 0 -n 24 -t 1; echo \$? > '$work/status'; sleep 60"
wait_for '^chat with .*template' 30
wait_for '^>$'
for turn in 1 2 3 4 5 6 7 8 9 10; do
  tmux send-keys -t "$session" "And it came to pass $turn" Enter
  wait_for "^> And it came to pass $turn\$" 10
  wait_for_prompt 30 "turn $turn"
done
if screen | grep -q '^error'; then echo "FAILED: a turn failed"; screen; exit 1; fi
echo "ok: ten turns answered$(screen | grep -q 'left out' && echo ', the oldest left out with a note')"
tmux send-keys -t "$session" C-d
