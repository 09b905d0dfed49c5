#!/bin/sh
# The client command the official MCP conformance suite runs for each client scenario: noeta's
# MCP client, as `noeta mcp call` drives it by hand. The suite appends the server's URL and
# names the scenario in MCP_CONFORMANCE_SCENARIO; $NOETA is the binary under test.
url="$1"
case "$MCP_CONFORMANCE_SCENARIO" in
    initialize)
        exec "$NOETA" mcp call "$url" ;;
    tools_call)
        exec "$NOETA" mcp call "$url" add_numbers '{"a": 5, "b": 3}' ;;
    elicitation-sep1034-client-defaults)
        # The person answers the form, taking every default (an empty line each).
        { echo y; yes '' | head -n 20; } | "$NOETA" mcp call "$url" test_client_elicitation_defaults ;;
    sse-retry)
        exec "$NOETA" mcp call "$url" test_reconnection ;;
    *)
        echo "client.sh: no client for scenario \`$MCP_CONFORMANCE_SCENARIO\`" >&2
        exit 2 ;;
esac
