#!/bin/sh
# clock-sh: a zot extension in POSIX shell, speaking the raw protocol (no SDK).
#
#   /now [utc]  shows the current time (a "display": the model is not involved)
#   /plan       asks the model to help plan the day, telling it the date (a "prompt")
#
# Frames are JSON lines on stdin and stdout; jq reads and writes them, so any
# text (quotes, newlines, unicode) is escaped properly. Diagnostics go to
# stderr, which zotd appends to $ZOT_HOME/logs/ext-clock-sh.log. Dates are
# written in English (LC_ALL=C), like the sentences around them.

set -u

if ! command -v jq >/dev/null 2>&1; then
    echo "clock-sh needs jq (https://jqlang.github.io/jq/) on PATH" >&2
    exit 1
fi

# One frame per line, in the order written. printf is a builtin: no buffering.
emit() {
    printf '%s\n' "$1"
}

# respond ID ACTION TEXT: a command_response with TEXT under the ACTION's key
# ("display" or "prompt"); ACTION "error" answers noop with an error message.
respond() {
    if [ "$2" = error ]; then
        emit "$(jq -cn --arg id "$1" --arg text "$3" \
            '{type: "command_response", id: $id, action: "noop", error: $text}')"
    else
        emit "$(jq -cn --arg id "$1" --arg action "$2" --arg text "$3" \
            '{type: "command_response", id: $id, action: $action, ($action): $text}')"
    fi
}

emit '{"type":"hello","name":"clock-sh","version":"1.0.0","capabilities":["commands"]}'
emit '{"type":"register_command","name":"now","description":"show the current time (/now [utc])"}'
emit '{"type":"register_command","name":"plan","description":"ask the agent to help plan the day"}'
emit '{"type":"ready"}'

# read returns non-zero at end of input (zotd closed our stdin): then we exit.
while IFS= read -r line; do
    # The type, or nothing for a line that is not a JSON object (skipped).
    type=$(printf '%s\n' "$line" | jq -r 'objects | .type // empty' 2>/dev/null) || type=
    case $type in
    command_invoked)
        id=$(printf '%s\n' "$line" | jq -r '.id')
        name=$(printf '%s\n' "$line" | jq -r '.name')
        args=$(printf '%s\n' "$line" | jq -r '.args // ""')
        case $name:$args in
        now:)
            respond "$id" display "$(LC_ALL=C date '+%H:%M:%S %Z, %A %d %B %Y')" ;;
        now:utc | now:UTC)
            respond "$id" display "$(LC_ALL=C date -u '+%H:%M:%S %Z, %A %d %B %Y')" ;;
        now:*)
            respond "$id" error "usage: /now [utc]" ;;
        plan:*)
            respond "$id" prompt "Today is $(LC_ALL=C date '+%A %d %B %Y'). Help me plan my day: ask me what I must get done, then suggest an order with rough times." ;;
        *)
            respond "$id" error "clock-sh has no command /$name" ;;
        esac
        ;;
    shutdown)
        emit '{"type":"shutdown_ack"}'
        exit 0
        ;;
    *)
        # hello_ack, and any frame a newer zotd may send: nothing to do.
        ;;
    esac
done
