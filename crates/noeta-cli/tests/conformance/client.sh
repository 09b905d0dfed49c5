#!/bin/sh
# The client command the official MCP conformance suite runs for each client scenario: noeta's
# MCP client, as `noeta mcp call` drives it by hand. The suite appends the server's URL and
# names the scenario in MCP_CONFORMANCE_SCENARIO; $NOETA is the binary under test. For the sign-in
# scenarios the "browser" is curl (set as $BROWSER by the test): it follows the authorization
# server's redirect back to noeta's loopback listener, as a person's browser would.
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
    auth/pre-registration)
        # A client registered beforehand: its id and secret come in the scenario's context.
        id=$(printf '%s' "$MCP_CONFORMANCE_CONTEXT" | sed -n 's/.*"client_id" *: *"\([^"]*\)".*/\1/p')
        CLIENT_SECRET=$(printf '%s' "$MCP_CONFORMANCE_CONTEXT" | sed -n 's/.*"client_secret" *: *"\([^"]*\)".*/\1/p')
        export CLIENT_SECRET
        "$NOETA" mcp login "$url" --client-id "$id" --client-secret-env CLIENT_SECRET &&
            exec "$NOETA" mcp call "$url" test-tool ;;
    auth/basic-cimd)
        # The suite's authorization server takes the client-metadata URL it expects.
        "$NOETA" mcp login "$url" --client-metadata-url https://conformance-test.local/client-metadata.json &&
            exec "$NOETA" mcp call "$url" test-tool ;;
    auth/*)
        # The server asks for sign-in; `mcp call` signs in and calls again.
        exec "$NOETA" mcp call "$url" test-tool ;;
    *)
        echo "client.sh: no client for scenario \`$MCP_CONFORMANCE_SCENARIO\`" >&2
        exit 2 ;;
esac
