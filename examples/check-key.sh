#!/bin/sh
# A gateway in any language checks the key its client presented before serving the request: one
# POST /v1/introspect with the gateway's own key (a system organisation's key holding
# keys:introspect), counting the request against the client's organisation as a direct one would.
# The client's key comes on stdin, never on a command line. Prints the key's organisation id and
# exits 0 when the request may go ahead; exits 1 for a key that is not valid (answer 401), 2 when
# its organisation is over its limit (answer 429), 3 when the key service cannot be asked (503).
set -eu
: "${COS_URL:?the key service, e.g. https://keys.example.com}"
: "${COS_INTROSPECT_KEY:?the gateway key, holding keys:introspect}"
IFS= read -r token || true
case "$token" in '' | *[!A-Za-z0-9_]*) exit 1 ;; esac
answer=$(printf 'header = "Authorization: Bearer %s"\ndata = "token=%s&count=true"\n' \
  "$COS_INTROSPECT_KEY" "$token" |
  curl --config - --silent --show-error --fail --max-time 2 "$COS_URL/v1/introspect") || exit 3
case "$answer" in '{"active":true'*) ;; *) exit 1 ;; esac
case "$answer" in *'"rate_limited":true'*) exit 2 ;; esac
printf '%s\n' "$answer" | sed 's/.*"organisation_id":"\([^"]*\)".*/\1/'
