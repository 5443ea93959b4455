package protocol

import "strings"

// plainHTTPToHTTPS is what Go's net/http server answers (400) when a plain
// HTTP request reaches a port that serves HTTPS.
const plainHTTPToHTTPS = "Client sent an HTTP request to an HTTPS server"

// ExplainNonProtocolReply returns the message to show for a non-2xx reply
// whose body is not an ErrorBody (status and trimmed body text): the body
// itself, or, when it says a plain HTTP request reached an HTTPS server,
// a message that names the cause and the cure (an https:// --server URL).
func ExplainNonProtocolReply(status int, body string) string {
	if status == 400 && strings.Contains(body, plainHTTPToHTTPS) {
		return "the server speaks HTTPS but this request used plain HTTP: give --server an https:// URL " +
			"(and --cacert if its certificate is not from a system CA); the server said: " + body
	}
	return body
}
